import { ConfigError } from './config';

/**
 * Public JSON-RPC endpoints that are rate limited and documented as not for production traffic. Fine for a
 * look around; a service polling one every few milliseconds is throttled and stops seeing the chain.
 */
export const PUBLIC_RATE_LIMITED_RPC_HOSTS: readonly string[] = [
  'mainnet.base.org',
  'sepolia.base.org',
  'mainnet-preconf.base.org',
  'sepolia-preconf.base.org',
];

/** The fastest polling a public rate-limited endpoint is allowed in production (Base makes a block every 2 s). */
export const MIN_PUBLIC_RPC_POLL_INTERVAL_MS = 1000;

export const MIN_PRODUCTION_SECRET_LENGTH = 24;

/** The shape of the fixed development values (dev-operator-token, …-not-secret, dev-only-…). */
const DEV_VALUE = /^dev[-_]|not[-_]?(a[-_])?secret|not[-_]for[-_]production|dev[-_]only/i;

const ZERO_ADDRESS = /^0x0{40}$/i;

export interface ProductionGuardOptions {
  /** The service the error names. */
  serviceName: string;
  /** NODE_ENV=production; every rule below applies only then. */
  production: boolean;
  /**
   * The escrow wallet the service uses: must not be the zero address, and ESCROW_ADDRESS must be set unless
   * `escrowFromKey` (settlement derives it from the key it signs with).
   */
  escrow?: { address: string; fromKey?: boolean };
  /** A service that polls the chain: a public rate-limited endpoint needs polls at least 1 s apart. */
  rpcPolling?: { url: string; intervalMs: number; variable: string };
  /**
   * Secrets that must be set explicitly (no development default), long enough (24 characters unless given),
   * and not a development value.
   */
  secrets?: ReadonlyArray<string | { name: string; minLength: number }>;
  /**
   * The gateway and the indexer must count confirmations the same way: each sees only its own environment, so
   * in production both need the one shared CONFIRMATIONS (k8s: the paygate-common ConfigMap), never their
   * differing per-service defaults.
   */
  sharedConfirmations?: boolean;
}

/**
 * The one production check of a service's configuration: throws one ConfigError naming the service and every
 * variable that breaks a rule. Outside production it checks nothing (the dev defaults are fine there).
 */
export function productionGuards(env: NodeJS.ProcessEnv, options: ProductionGuardOptions): void {
  if (!options.production) return;
  const problems: string[] = [];
  if (options.escrow) {
    if (!options.escrow.fromKey && !env.ESCROW_ADDRESS?.trim())
      problems.push('ESCROW_ADDRESS: must be set to the escrow wallet in production (no default)');
    else if (ZERO_ADDRESS.test(options.escrow.address))
      problems.push('ESCROW_ADDRESS: must not be the zero address in production');
  }
  if (options.rpcPolling) {
    const { url, intervalMs, variable } = options.rpcPolling;
    let host = '';
    try {
      host = new URL(url).hostname.toLowerCase();
    } catch {
      // chainConfig already refused a malformed URL
    }
    if (PUBLIC_RATE_LIMITED_RPC_HOSTS.includes(host) && intervalMs < MIN_PUBLIC_RPC_POLL_INTERVAL_MS)
      problems.push(
        `CHAIN_RPC_URL: ${host} is a public rate-limited endpoint; with ${variable}=${intervalMs} it is throttled ` +
          `in production: use a provider's endpoint or set ${variable} to at least ${MIN_PUBLIC_RPC_POLL_INTERVAL_MS}`,
      );
  }
  for (const secret of options.secrets ?? []) {
    const { name, minLength } =
      typeof secret === 'string' ? { name: secret, minLength: MIN_PRODUCTION_SECRET_LENGTH } : secret;
    const value = env[name] ?? '';
    if (!value.trim()) problems.push(`${name}: must be set in production (no default)`);
    else if (value.length < minLength)
      problems.push(`${name}: must be at least ${minLength} characters in production`);
    else if (DEV_VALUE.test(value)) problems.push(`${name}: must not be a development value in production`);
  }
  if (options.sharedConfirmations && !env.CONFIRMATIONS?.trim())
    problems.push(
      'CONFIRMATIONS: must be set in production, the same value for gateway-proxy and chain-indexer ' +
        '(one shared setting; the per-service defaults differ)',
    );
  if (problems.length > 0)
    throw new ConfigError(
      `invalid production configuration of ${options.serviceName}: ${problems.join('; ')}`,
    );
}
