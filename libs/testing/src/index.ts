export * from './anvil';
export * from './infra';
export * from './processes';
export * from './registry-client';
export * from './routes';
export * from './wallets';
