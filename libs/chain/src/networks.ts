/** The chains Paygate can run on. Money moves only in USDC; every network names its USDC contract. */

export type NetworkName = 'base' | 'base-sepolia' | 'local';

interface ChainNetwork {
  name: NetworkName;
  chainId: number;
  /** null for `local`, where TestUSDC is deployed per run and comes from config. */
  usdcAddress: string | null;
  /** USDC's EIP-712 domain (Circle's Base Sepolia deployment says "USDC", mainnet "USD Coin"). */
  usdcEip712Name: string;
  usdcEip712Version: string;
  caip2: string;
  /** Default CONFIRMATIONS (its block counts as one): a Base reorg past a few blocks needs an L1 reorg. */
  confirmations: number;
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
  }),
  'base-sepolia': Object.freeze({
    name: 'base-sepolia',
    chainId: 84532,
    usdcAddress: '0x036CbD53842c5426634e7929541eC2318f3dCF7e',
    usdcEip712Name: 'USDC',
    usdcEip712Version: '2',
    caip2: 'eip155:84532',
    confirmations: 3,
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
  }),
});

const NETWORK_NAMES = Object.keys(networks) as NetworkName[];

export function isNetworkName(name: string): name is NetworkName {
  return Object.hasOwn(networks, name);
}

export function networkByName(name: string): Readonly<ChainNetwork> {
  if (!isNetworkName(name)) {
    throw new RangeError(`unknown network "${name}"; expected one of: ${NETWORK_NAMES.join(', ')}`);
  }
  return networks[name];
}

export function networkByChainId(chainId: number | bigint): Readonly<ChainNetwork> {
  const found = Object.values(networks).find((n) => BigInt(n.chainId) === BigInt(chainId));
  if (!found) {
    const known = Object.values(networks)
      .map((n) => `${n.name}=${n.chainId}`)
      .join(', ');
    throw new RangeError(`unknown chainId ${chainId}; expected one of: ${known}`);
  }
  return found;
}

/** USDC address for a network: the built-in one, or the configured one for `local` (and as an override). */
export function resolveUsdcAddress(
  network: Readonly<ChainNetwork>,
  configuredAddress?: string | null,
): string {
  const address = configuredAddress || network.usdcAddress;
  if (!address) throw new RangeError(`network "${network.name}" has no built-in USDC address; configure one`);
  return address;
}
