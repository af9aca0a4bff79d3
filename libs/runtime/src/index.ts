export * from './config';
export * from './database';
export * from './main';
export * from './metrics';
export * from './retry';
export * from './service';
