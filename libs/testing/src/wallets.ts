import { computeAddress, type Provider, Wallet } from 'ethers';

export interface TestWallet {
  /** Checksummed address. */
  address: string;
  privateKey: string;
  /** Index in the mnemonic's m/44'/60'/0'/0/<index> path (= position in anvil's account list). */
  accountIndex: number;
}

/** Keys of anvil's accounts 0-7 (the public dev mnemonic) by role: known to all, for dev chains only. */
const ACCOUNTS = {
  deployer: '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80',
  escrow: '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d',
  buyer: '0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a',
  seller: '0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6',
  platform: '0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a',
  stranger: '0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba',
  // The x402 relayer: pays gas for transferWithAuthorization, holds no USDC.
  relayer: '0x92db14e403b83dfe3df233f83dfa3a0d7096f21ca9b0d6d6b8d88b2b4ec1564e',
  // The checkout deposit wallet: not the agent escrow, so an agent's payment never matches a session.
  checkoutEscrow: '0x4bbbf85ce3377467afe5d46f804f221813b2bb87f24d81f60f1fcdbf7cbf4356',
} as const;

export type TestWalletRole = keyof typeof ACCOUNTS;

/** The accounts as wallets, all pre-funded with 10,000 ETH. */
export const testWallets: Readonly<Record<TestWalletRole, Readonly<TestWallet>>> = Object.freeze(
  Object.fromEntries(
    Object.entries(ACCOUNTS).map(([role, privateKey], accountIndex) => [
      role,
      { address: computeAddress(privateKey), privateKey, accountIndex },
    ]),
  ) as Record<TestWalletRole, TestWallet>,
);

export function testSigner(role: TestWalletRole, provider: Provider): Wallet {
  return new Wallet(testWallets[role].privateKey, provider);
}
