export * from './anvil';
export * from './wallets';
