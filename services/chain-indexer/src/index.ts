export * from './config';
export * from './service';
