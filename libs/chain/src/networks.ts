/** The chains Paygate can run on. Money moves only in USDC; every network names its USDC contract. */

export type NetworkName = 'base' | 'base-sepolia' | 'local';

interface ChainNetwork {
  name: NetworkName;
  chainId: number;
  /** Checksummed USDC contract address; null for `local`, where TestUSDC is deployed per run and comes from config. */
  usdcAddress: string | null;
  /** EIP-712 domain name of the USDC contract (Circle's Base Sepolia deployment uses "USDC", mainnet "USD Coin"). */
  usdcEip712Name: string;
  /** EIP-712 domain version of the USDC contract (FiatToken v2.2 answers "2" to `version()`). */
  usdcEip712Version: string;
  /** x402 v2's CAIP-2 name of the chain (`eip155:<chainId>`). */
  caip2: string;
  /**
   * Confirmations a payment needs by default (its own block counts as one): the services' CONFIRMATIONS
   * unless set. Base's sequencer orders blocks within ~2 s and a reorg past a few blocks needs an L1 reorg.
   */
  confirmations: number;
  /** Expected time between blocks, for polling and confirmation-time estimates. */
  blockTimeMs: number;
  /** Block explorer base URL, null when there is none. */
  explorerUrl: string | null;
}

export const networks: Readonly<Record<NetworkName, Readonly<ChainNetwork>>> = Object.freeze({
  base: Object.freeze({
    name: 'base',
    chainId: 8453,
    usdcAddress: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
    usdcEip712Name: 'USD Coin',
    usdcEip712Version: '2',
    caip2: 'eip155:8453',
    confirmations: 3,
    blockTimeMs: 2000,
    explorerUrl: 'https://basescan.org',
  }),
  'base-sepolia': Object.freeze({
    name: 'base-sepolia',
    chainId: 84532,
    usdcAddress: '0x036CbD53842c5426634e7929541eC2318f3dCF7e',
    usdcEip712Name: 'USDC',
    usdcEip712Version: '2',
    caip2: 'eip155:84532',
    confirmations: 3,
    blockTimeMs: 2000,
    explorerUrl: 'https://sepolia.basescan.org',
  }),
  local: Object.freeze({
    name: 'local',
    chainId: 31337,
    usdcAddress: null,
    // deploy/contracts/TestUSDC.sol: the same domain as Base mainnet's USDC.
    usdcEip712Name: 'USD Coin',
    usdcEip712Version: '2',
    caip2: 'eip155:31337',
    confirmations: 1,
    blockTimeMs: 1000,
    explorerUrl: null,
  }),
});

const NETWORK_NAMES = Object.keys(networks) as NetworkName[];

/** CHAIN_NETWORK when unset: the local development chain of `make dev` and the tests. */
export const DEFAULT_NETWORK_NAME: NetworkName = 'local';

/**
 * The network CHAIN_NETWORK names (the one switch between the local chain, Base Sepolia and Base mainnet), or the
 * default when it is unset or empty. Throws naming the variable and the accepted names otherwise.
 */
export function networkFromEnv(env: Readonly<Record<string, string | undefined>>): Readonly<ChainNetwork> {
  const name = env.CHAIN_NETWORK?.trim() || DEFAULT_NETWORK_NAME;
  if (!isNetworkName(name)) {
    throw new Error(`CHAIN_NETWORK: must be one of ${NETWORK_NAMES.join(', ')} (got "${name}")`);
  }
  return networks[name];
}

export function isNetworkName(name: string): name is NetworkName {
  return Object.hasOwn(networks, name);
}

export function networkByName(name: string): Readonly<ChainNetwork> {
  if (!isNetworkName(name)) {
    throw new Error(`unknown network "${name}"; expected one of: ${NETWORK_NAMES.join(', ')}`);
  }
  return networks[name];
}

export function networkByChainId(chainId: number | bigint): Readonly<ChainNetwork> {
  const found = Object.values(networks).find((n) => BigInt(n.chainId) === BigInt(chainId));
  if (!found) {
    const known = Object.values(networks)
      .map((n) => `${n.name}=${n.chainId}`)
      .join(', ');
    throw new Error(`unknown chainId ${chainId}; expected one of: ${known}`);
  }
  return found;
}

/** USDC address for a network: the built-in one, or the configured one for `local` (and as an override). */
export function resolveUsdcAddress(
  network: Readonly<ChainNetwork>,
  configuredAddress?: string | null,
): string {
  const address = configuredAddress || network.usdcAddress;
  if (!address) throw new Error(`network "${network.name}" has no built-in USDC address; configure one`);
  return address;
}
