export * from './connection';
export * from './consumer';
export * from './dead-letters';
export * from './migrations';
export * from './outbox';
export * from './polling-loop';
export * from './tables';
