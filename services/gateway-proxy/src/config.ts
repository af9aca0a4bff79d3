import {
  formatAddress,
  isNetworkName,
  type NetworkName,
  networkByName,
  resolveUsdcAddress,
} from '@paygate/chain';
import { type CommonConfig, ConfigError, commonConfig, num, parseEnv, str } from '@paygate/runtime';

export interface GatewayProxyConfig extends CommonConfig {
  chainRpcUrl: string;
  network: NetworkName;
  chainId: number;
  /** Checksummed USDC contract the payments must use. */
  usdcAddress: string;
  /** Checksummed escrow wallet every payment must reach. */
  escrowAddress: string;
  confirmations: number;
  /** ES256 private key (PEM); when absent the gateway schema holds one generated key shared by all replicas. */
  ticketSigningKeyPem: string | undefined;
  ticketTtlSeconds: number;
  rateLimitPerMinute: number;
  upstreamTimeoutMs: number;
  /** How long a payment whose upstream call failed stays usable for a retry of the same resource. */
  retryWindowSeconds: number;
  chainTimeoutMs: number;
  /** Injected clock: tests move time without sleeping. */
  now: () => Date;
}

/** Parses the environment once; throws a ConfigError naming every bad variable. */
export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  now: () => Date = () => new Date(),
): GatewayProxyConfig {
  const common = commonConfig(env, { serviceName: 'gateway-proxy', schema: 'gateway', port: 8082 });
  const parsed = parseEnv<{
    CHAIN_RPC_URL: string;
    CHAIN_NETWORK: string;
    USDC_ADDRESS: string;
    ESCROW_ADDRESS: string;
    CONFIRMATIONS: number;
    TICKET_SIGNING_KEY: string;
    TICKET_TTL_SECONDS: number;
    RATE_LIMIT_PER_MINUTE: number;
    UPSTREAM_TIMEOUT_MS: number;
    RETRY_WINDOW_SECONDS: number;
    CHAIN_TIMEOUT_MS: number;
  }>(env, {
    CHAIN_RPC_URL: str({ default: 'http://127.0.0.1:8545' }),
    CHAIN_NETWORK: str({ default: 'local', choices: ['local', 'base', 'base-sepolia'] }),
    USDC_ADDRESS: str({ default: '' }),
    ESCROW_ADDRESS: str({ default: '' }),
    CONFIRMATIONS: num({ default: -1 }),
    TICKET_SIGNING_KEY: str({ default: '' }),
    TICKET_TTL_SECONDS: num({ default: 300 }),
    RATE_LIMIT_PER_MINUTE: num({ default: 60 }),
    UPSTREAM_TIMEOUT_MS: num({ default: 10_000 }),
    RETRY_WINDOW_SECONDS: num({ default: 600 }),
    CHAIN_TIMEOUT_MS: num({ default: 5000 }),
  });
  const problems: string[] = [];
  const networkName = parsed.CHAIN_NETWORK;
  if (!isNetworkName(networkName)) problems.push('CHAIN_NETWORK: must be local, base or base-sepolia');
  const network = networkByName(isNetworkName(networkName) ? networkName : 'local');
  let usdcAddress = '';
  try {
    usdcAddress = formatAddress(resolveUsdcAddress(network, parsed.USDC_ADDRESS || null));
  } catch (error) {
    problems.push(`USDC_ADDRESS: ${(error as Error).message} (required for CHAIN_NETWORK=local)`);
  }
  let escrowAddress = '';
  try {
    escrowAddress = formatAddress(parsed.ESCROW_ADDRESS);
  } catch {
    problems.push('ESCROW_ADDRESS: is required, a 20-byte hex address');
  }
  const positive = (name: string, value: number) => {
    if (!Number.isInteger(value) || value < 1) problems.push(`${name}: must be a positive integer`);
  };
  const confirmations =
    parsed.CONFIRMATIONS === -1 ? (network.name === 'local' ? 1 : 3) : parsed.CONFIRMATIONS;
  positive('CONFIRMATIONS', confirmations);
  positive('TICKET_TTL_SECONDS', parsed.TICKET_TTL_SECONDS);
  positive('RATE_LIMIT_PER_MINUTE', parsed.RATE_LIMIT_PER_MINUTE);
  positive('UPSTREAM_TIMEOUT_MS', parsed.UPSTREAM_TIMEOUT_MS);
  positive('RETRY_WINDOW_SECONDS', parsed.RETRY_WINDOW_SECONDS);
  positive('CHAIN_TIMEOUT_MS', parsed.CHAIN_TIMEOUT_MS);
  const pem = parsed.TICKET_SIGNING_KEY.replace(/\\n/g, '\n').trim();
  if (pem && !pem.includes('PRIVATE KEY')) problems.push('TICKET_SIGNING_KEY: must be a PEM EC private key');
  if (problems.length > 0) throw new ConfigError(`invalid configuration: ${problems.join('; ')}`);
  return {
    ...common,
    chainRpcUrl: parsed.CHAIN_RPC_URL,
    network: network.name,
    chainId: network.chainId,
    usdcAddress,
    escrowAddress,
    confirmations,
    ticketSigningKeyPem: pem || undefined,
    ticketTtlSeconds: parsed.TICKET_TTL_SECONDS,
    rateLimitPerMinute: parsed.RATE_LIMIT_PER_MINUTE,
    upstreamTimeoutMs: parsed.UPSTREAM_TIMEOUT_MS,
    retryWindowSeconds: parsed.RETRY_WINDOW_SECONDS,
    chainTimeoutMs: parsed.CHAIN_TIMEOUT_MS,
    now,
  };
}
