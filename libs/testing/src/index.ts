export * from './anvil';
export * from './wallets';
export * from './infra';
