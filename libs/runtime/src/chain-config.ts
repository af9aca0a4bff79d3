import {
  formatAddress,
  isNetworkName,
  type NetworkName,
  networkByName,
  resolveUsdcAddress,
} from '@paygate/chain';
import { int, parseEnv, str, throwIfProblems } from './config';

/** The chain settings every service that reads or writes the chain shares. */
export interface ChainConfig {
  /** CHAIN_RPC_URL */
  rpcUrl: string;
  /** CHAIN_NETWORK: base | base-sepolia | local */
  network: NetworkName;
  chainId: number;
  /** USDC_ADDRESS (checksummed): the network's own USDC unless set; required on local. */
  usdcAddress: string;
  /** ESCROW_ADDRESS (checksummed): the wallet every payment reaches. */
  escrowAddress: string;
  /** CONFIRMATIONS: a transfer counts once its block has this many (its own block counts as one). */
  confirmations: number;
  /** RPC_TIMEOUT_MS: timeout of each JSON-RPC call. */
  rpcTimeoutMs: number;
}

interface ChainConfigDefaults {
  /** Default CONFIRMATIONS, or one per network; without it the network preset's (libs/chain networks.ts). */
  confirmations?: number | ((network: NetworkName) => number);
  rpcTimeoutMs: number;
  /** Default ESCROW_ADDRESS; without one the variable is required. */
  escrowAddress?: string;
}

/** Parses the chain variables once, throwing one ConfigError that names every bad variable and its rule. */
export function chainConfig(env: NodeJS.ProcessEnv, defaults: ChainConfigDefaults): ChainConfig {
  const problems: string[] = [];
  const parsed = parseEnv(
    env,
    {
      CHAIN_RPC_URL: str({ default: 'http://127.0.0.1:8545' }),
      CHAIN_NETWORK: str({ default: 'local' }),
      USDC_ADDRESS: str({ default: '' }),
      ESCROW_ADDRESS: str({ default: defaults.escrowAddress ?? '' }),
      CONFIRMATIONS: str({ default: '' }),
      RPC_TIMEOUT_MS: int({ default: defaults.rpcTimeoutMs, min: 1 }),
    },
    problems,
  );
  if (!/^(https?|wss?):\/\/[^\s]+$/.test(parsed.CHAIN_RPC_URL ?? '')) {
    problems.push('CHAIN_RPC_URL: must be an http(s) or ws(s) URL');
  }
  const networkName = parsed.CHAIN_NETWORK ?? '';
  if (!isNetworkName(networkName)) problems.push('CHAIN_NETWORK: must be local, base or base-sepolia');
  const network = networkByName(isNetworkName(networkName) ? networkName : 'local');
  let usdcAddress = '';
  try {
    usdcAddress = formatAddress(resolveUsdcAddress(network, parsed.USDC_ADDRESS || null));
  } catch {
    problems.push(`USDC_ADDRESS: must be a 20-byte hex address (required for CHAIN_NETWORK=${network.name})`);
  }
  let escrowAddress = '';
  try {
    escrowAddress = formatAddress(parsed.ESCROW_ADDRESS ?? '');
  } catch {
    problems.push('ESCROW_ADDRESS: is required, a 20-byte hex address');
  }
  const defaultConfirmations =
    typeof defaults.confirmations === 'function'
      ? defaults.confirmations(network.name)
      : (defaults.confirmations ?? network.confirmations);
  const confirmations =
    (parsed.CONFIRMATIONS ?? '') === '' ? defaultConfirmations : Number(parsed.CONFIRMATIONS);
  if (!Number.isSafeInteger(confirmations) || confirmations < 1) {
    problems.push('CONFIRMATIONS: must be a positive integer');
  }
  throwIfProblems(problems, parsed);
  return {
    rpcUrl: parsed.CHAIN_RPC_URL,
    network: network.name,
    chainId: network.chainId,
    usdcAddress,
    escrowAddress,
    confirmations,
    rpcTimeoutMs: parsed.RPC_TIMEOUT_MS,
  };
}
