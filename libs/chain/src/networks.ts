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

/** A frozen preset; every USDC domain Paygate knows is version 2, and CAIP-2 follows from the chain id. */
const preset = (
  name: NetworkName,
  chainId: number,
  usdcAddress: string | null,
  usdcEip712Name: string,
  confirmations: number,
): Readonly<ChainNetwork> =>
  Object.freeze({
    name,
    chainId,
    usdcAddress,
    usdcEip712Name,
    usdcEip712Version: '2',
    caip2: `eip155:${chainId}`,
    confirmations,
  });

export const networks: Readonly<Record<NetworkName, Readonly<ChainNetwork>>> = Object.freeze({
  base: preset('base', 8453, '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913', 'USD Coin', 3),
  'base-sepolia': preset('base-sepolia', 84532, '0x036CbD53842c5426634e7929541eC2318f3dCF7e', 'USDC', 3),
  // deploy/contracts/TestUSDC.sol: the same domain as Base mainnet's USDC.
  local: preset('local', 31337, null, 'USD Coin', 1),
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
