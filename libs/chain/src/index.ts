export * from './address';
export * from './errors';
export * from './logs';
export * from './networks';
export * from './provider';
export * from './uri';
export * from './usdc';
