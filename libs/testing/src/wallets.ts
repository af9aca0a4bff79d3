import { type Provider, Wallet } from 'ethers';

export interface TestWallet {
  /** Checksummed address. */
  address: string;
  privateKey: string;
  /** Index in the mnemonic's m/44'/60'/0'/0/<index> path (= position in anvil's account list). */
  accountIndex: number;
}

/**
 * Anvil's default accounts 0-7 (address, private key) of the public dev mnemonic, named by their role in Paygate
 * tests. Their keys are known to everyone: never use them outside a dev chain.
 */
const ACCOUNTS = {
  deployer: [
    '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266',
    '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80',
  ],
  escrow: [
    '0x70997970C51812dc3A010C7d01b50e0d17dc79C8',
    '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d',
  ],
  buyer: [
    '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC',
    '0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a',
  ],
  seller: [
    '0x90F79bf6EB2c4f870365E785982E1f101E93b906',
    '0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6',
  ],
  platform: [
    '0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65',
    '0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a',
  ],
  stranger: [
    '0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc',
    '0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba',
  ],
  // The x402 relayer: pays gas for transferWithAuthorization, holds no USDC.
  relayer: [
    '0x976EA74026E726554dB657fA54763abd0C3a0aa9',
    '0x92db14e403b83dfe3df233f83dfa3a0d7096f21ca9b0d6d6b8d88b2b4ec1564e',
  ],
  // The checkout deposit wallet (CHECKOUT_ESCROW_ADDRESS): apart from the agent escrow, so an agent's payment
  // never matches a session; settlement sweeps it into escrow.
  checkoutEscrow: [
    '0x14dC79964da2C08b23698B3D3cc7Ca32193d9955',
    '0x4bbbf85ce3377467afe5d46f804f221813b2bb87f24d81f60f1fcdbf7cbf4356',
  ],
} as const;

export type TestWalletRole = keyof typeof ACCOUNTS;

/** The accounts as wallets, all pre-funded with 10,000 ETH. */
export const testWallets: Readonly<Record<TestWalletRole, Readonly<TestWallet>>> = Object.freeze(
  Object.fromEntries(
    Object.entries(ACCOUNTS).map(([role, [address, privateKey]], accountIndex) => [
      role,
      { address, privateKey, accountIndex },
    ]),
  ) as Record<TestWalletRole, TestWallet>,
);

/** An ethers signer for a test wallet. */
export function testSigner(role: TestWalletRole, provider: Provider): Wallet {
  return new Wallet(testWallets[role].privateKey, provider);
}
