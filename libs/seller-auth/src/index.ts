export * from './middleware';
export * from './protocol';
export * from './test-responder';
