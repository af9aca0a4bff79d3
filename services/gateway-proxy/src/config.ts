import {
  type ChainConfig,
  type CommonConfig,
  ConfigError,
  chainConfig,
  commonConfig,
  num,
  parseEnv,
  str,
} from '@paygate/runtime';

/** Chain settings (payments must use usdcAddress and reach escrowAddress) plus the gateway's own. */
export interface GatewayProxyConfig extends CommonConfig, ChainConfig {
  /** ES256 private key (PEM); when absent the gateway schema holds one generated key shared by all replicas. */
  ticketSigningKeyPem: string | undefined;
  ticketTtlSeconds: number;
  rateLimitPerMinute: number;
  upstreamTimeoutMs: number;
  /** How long a payment whose upstream call failed stays usable for a retry of the same resource. */
  retryWindowSeconds: number;
  /** Injected clock: tests move time without sleeping. */
  now: () => Date;
}

/** Parses the environment once; throws a ConfigError naming every bad variable. */
export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  now: () => Date = () => new Date(),
): GatewayProxyConfig {
  const common = commonConfig(env, { serviceName: 'gateway-proxy', schema: 'gateway', port: 8082 });
  // CHAIN_TIMEOUT_MS is the gateway's former name of RPC_TIMEOUT_MS, still honoured.
  const chain = chainConfig(
    { ...env, RPC_TIMEOUT_MS: env.RPC_TIMEOUT_MS ?? env.CHAIN_TIMEOUT_MS },
    { confirmations: (network) => (network === 'local' ? 1 : 3), rpcTimeoutMs: 5000 },
  );
  const parsed = parseEnv<{
    TICKET_SIGNING_KEY: string;
    TICKET_TTL_SECONDS: number;
    RATE_LIMIT_PER_MINUTE: number;
    UPSTREAM_TIMEOUT_MS: number;
    RETRY_WINDOW_SECONDS: number;
  }>(env, {
    TICKET_SIGNING_KEY: str({ default: '' }),
    TICKET_TTL_SECONDS: num({ default: 300 }),
    RATE_LIMIT_PER_MINUTE: num({ default: 60 }),
    UPSTREAM_TIMEOUT_MS: num({ default: 10_000 }),
    RETRY_WINDOW_SECONDS: num({ default: 600 }),
  });
  const problems: string[] = [];
  const positive = (name: string, value: number) => {
    if (!Number.isInteger(value) || value < 1) problems.push(`${name}: must be a positive integer`);
  };
  positive('TICKET_TTL_SECONDS', parsed.TICKET_TTL_SECONDS);
  positive('RATE_LIMIT_PER_MINUTE', parsed.RATE_LIMIT_PER_MINUTE);
  positive('UPSTREAM_TIMEOUT_MS', parsed.UPSTREAM_TIMEOUT_MS);
  positive('RETRY_WINDOW_SECONDS', parsed.RETRY_WINDOW_SECONDS);
  const pem = parsed.TICKET_SIGNING_KEY.replace(/\\n/g, '\n').trim();
  if (pem && !pem.includes('PRIVATE KEY')) problems.push('TICKET_SIGNING_KEY: must be a PEM EC private key');
  if (problems.length > 0) throw new ConfigError(`invalid configuration: ${problems.join('; ')}`);
  return {
    ...common,
    ...chain,
    ticketSigningKeyPem: pem || undefined,
    ticketTtlSeconds: parsed.TICKET_TTL_SECONDS,
    rateLimitPerMinute: parsed.RATE_LIMIT_PER_MINUTE,
    upstreamTimeoutMs: parsed.UPSTREAM_TIMEOUT_MS,
    retryWindowSeconds: parsed.RETRY_WINDOW_SECONDS,
    now,
  };
}
