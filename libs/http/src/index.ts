export * from './app';
export * from './auth';
export * from './errors';
export * from './openapi';
export * from './validation';
