export * from './anvil';
export * from './wallets';
export * from './infra';
export * from './processes';
