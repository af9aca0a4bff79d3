import { formatAddress } from '@paygate/chain';
import {
  type ChainConfig,
  type CommonConfig,
  ConfigError,
  chainConfig,
  commonConfig,
  num,
  parseEnv,
  productionGuards,
  str,
} from '@paygate/runtime';

/** Checkout only names the chain (sessions carry network, chain id, USDC and deposit address); it never calls it. */
export interface CheckoutConfig
  extends CommonConfig,
    Pick<ChainConfig, 'network' | 'chainId' | 'usdcAddress' | 'escrowAddress'> {
  /**
   * CHECKOUT_ESCROW_ADDRESS: the checkout deposit wallet every session is paid to, distinct from the agent
   * escrow (ESCROW_ADDRESS, where 402 payments go). Only transfers to it are matched to sessions by amount,
   * so an agent's payment can never pay a session whose exact amount equals its price. Defaults to
   * ESCROW_ADDRESS outside production (the old shared address); required and distinct in production.
   */
  checkoutEscrowAddress: string;
  sessionTtlSeconds: number;
  /** After expiry, how long a payment of the exact amount still matches (recorded as paid_late). */
  lateWindowSeconds: number;
  /** Suffixes are drawn from 1 .. range-1 micro-USDC (10000: below one cent); the smallest range of any price. */
  amountSuffixRangeMicro: number;
  /**
   * A price's range grows with it: range = clamp(price x percent / 100, amountSuffixRangeMicro,
   * amountSuffixMaxRangeMicro) (1: a suffix below 1% of the price). 0: every price has amountSuffixRangeMicro.
   */
  amountSuffixPercent: number;
  amountSuffixMaxRangeMicro: number;
  /** Session creations per minute per key (pk_ or sk_), shared by every replica. */
  sessionRateLimitPerKey: number;
  /** Session creations per minute per client address with a publishable key (the browser's), over all keys. */
  sessionRateLimitPerClient: number;
  /** Open sessions (not yet expired or paid) one seller may have at a time (0: no cap). */
  maxOpenSessionsPerSeller: number;
  /** Share (percent) of one price's suffixes a seller's unpaid sessions may hold: no seller can exhaust a price. */
  maxAmountSharePercent: number;
  /** Hold period of sessions created with the secret key when the body names none. */
  defaultHoldPeriodHours: number;
  /** How often open sessions are expired and stale amount reservations released. */
  sweepIntervalMs: number;
  /** Bearer token of the operator routes (/api/v1/operator/transfers). */
  operatorToken: string;
  /** How long the session-creation path trusts its in-memory copy of a seller/skill projection row. */
  projectionCacheTtlMs: number;
  /** Injected clock: tests move time without sleeping. */
  now: () => Date;
}

const DEV_OPERATOR_TOKEN = 'dev-operator-token';

/** CHECKOUT_ESCROW_ADDRESS checksummed; unset: ESCROW_ADDRESS (refused in production by productionDeposit). */
function checkoutDepositAddress(value: string, escrowAddress: string, problems: string[]): string {
  if (!value.trim()) return escrowAddress;
  try {
    return formatAddress(value.trim());
  } catch {
    problems.push('CHECKOUT_ESCROW_ADDRESS: must be a 20-byte hex address');
    return escrowAddress;
  }
}

/**
 * In production the deposit wallet must be set, non-zero and distinct from ESCROW_ADDRESS: on one shared address
 * a transfer's amount is all that tells an agent's payment from a session's, and a session whose exact amount
 * equals a public price would capture that price's payments. Checked after productionGuards (which names the
 * escrow's own problems first), in its message format.
 */
function productionDeposit(env: NodeJS.ProcessEnv, address: string, escrowAddress: string): void {
  const problems: string[] = [];
  if (!env.CHECKOUT_ESCROW_ADDRESS?.trim()) {
    problems.push('CHECKOUT_ESCROW_ADDRESS: must be set in production to the checkout deposit wallet');
  } else if (/^0x0{40}$/i.test(address)) {
    problems.push('CHECKOUT_ESCROW_ADDRESS: must not be the zero address in production');
  } else if (address.toLowerCase() === escrowAddress.toLowerCase()) {
    problems.push(
      'CHECKOUT_ESCROW_ADDRESS: must differ from ESCROW_ADDRESS (the agent escrow) in production',
    );
  }
  if (problems.length > 0) {
    throw new ConfigError(`invalid production configuration of checkout: ${problems.join('; ')}`);
  }
}

/** Parses the environment once; throws a ConfigError naming every bad variable. */
export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  now: () => Date = () => new Date(),
): CheckoutConfig {
  const common = commonConfig(env, { serviceName: 'checkout', schema: 'checkout', port: 8083 });
  const { network, chainId, usdcAddress, escrowAddress } = chainConfig(env, {
    confirmations: 2,
    rpcTimeoutMs: 10_000,
    // anvil's account 1, the escrow wallet of the local chain (libs/testing testWallets.escrow)
    escrowAddress: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8',
  });
  const parsed = parseEnv<{
    SESSION_TTL_SECONDS: number;
    LATE_WINDOW_SECONDS: number;
    AMOUNT_SUFFIX_RANGE_MICRO: number;
    DEFAULT_HOLD_PERIOD_HOURS: number;
    SWEEP_INTERVAL_MS: number;
    OPERATOR_TOKEN: string;
    PROJECTION_CACHE_TTL_MS: number;
    CHECKOUT_ESCROW_ADDRESS: string;
    AMOUNT_SUFFIX_PERCENT: number;
    AMOUNT_SUFFIX_MAX_RANGE_MICRO: number;
    SESSION_RATE_LIMIT_PER_KEY: number;
    SESSION_RATE_LIMIT_PER_CLIENT: number;
    MAX_OPEN_SESSIONS_PER_SELLER: number;
    MAX_AMOUNT_SHARE_PERCENT: number;
  }>(env, {
    SESSION_TTL_SECONDS: num({ default: 900 }),
    LATE_WINDOW_SECONDS: num({ default: 86_400 }),
    AMOUNT_SUFFIX_RANGE_MICRO: num({ default: 10_000 }),
    DEFAULT_HOLD_PERIOD_HOURS: num({ default: 48 }),
    SWEEP_INTERVAL_MS: num({ default: 1000 }),
    OPERATOR_TOKEN: str({ default: DEV_OPERATOR_TOKEN }),
    PROJECTION_CACHE_TTL_MS: num({ default: 2000 }),
    CHECKOUT_ESCROW_ADDRESS: str({ default: '' }),
    AMOUNT_SUFFIX_PERCENT: num({ default: 1 }),
    AMOUNT_SUFFIX_MAX_RANGE_MICRO: num({ default: 1_000_000 }),
    SESSION_RATE_LIMIT_PER_KEY: num({ default: 600 }),
    SESSION_RATE_LIMIT_PER_CLIENT: num({ default: 120 }),
    MAX_OPEN_SESSIONS_PER_SELLER: num({ default: 1000 }),
    MAX_AMOUNT_SHARE_PERCENT: num({ default: 20 }),
  });
  const problems: string[] = [];
  const checkoutEscrowAddress = checkoutDepositAddress(
    parsed.CHECKOUT_ESCROW_ADDRESS,
    escrowAddress,
    problems,
  );
  const positiveInt = (name: string, value: number, min: number, max: number) => {
    if (!Number.isInteger(value) || value < min || value > max)
      problems.push(`${name} must be an integer from ${min} to ${max}`);
  };
  positiveInt('SESSION_TTL_SECONDS', parsed.SESSION_TTL_SECONDS, 1, 7 * 86_400);
  positiveInt('LATE_WINDOW_SECONDS', parsed.LATE_WINDOW_SECONDS, 0, 30 * 86_400);
  positiveInt('AMOUNT_SUFFIX_RANGE_MICRO', parsed.AMOUNT_SUFFIX_RANGE_MICRO, 2, 100_000_000);
  positiveInt('DEFAULT_HOLD_PERIOD_HOURS', parsed.DEFAULT_HOLD_PERIOD_HOURS, 0, 168);
  positiveInt('SWEEP_INTERVAL_MS', parsed.SWEEP_INTERVAL_MS, 10, 600_000);
  positiveInt('PROJECTION_CACHE_TTL_MS', parsed.PROJECTION_CACHE_TTL_MS, 0, 60_000);
  positiveInt('AMOUNT_SUFFIX_PERCENT', parsed.AMOUNT_SUFFIX_PERCENT, 0, 10);
  positiveInt('AMOUNT_SUFFIX_MAX_RANGE_MICRO', parsed.AMOUNT_SUFFIX_MAX_RANGE_MICRO, 2, 100_000_000);
  positiveInt('SESSION_RATE_LIMIT_PER_KEY', parsed.SESSION_RATE_LIMIT_PER_KEY, 1, 1_000_000);
  positiveInt('SESSION_RATE_LIMIT_PER_CLIENT', parsed.SESSION_RATE_LIMIT_PER_CLIENT, 1, 1_000_000);
  positiveInt('MAX_OPEN_SESSIONS_PER_SELLER', parsed.MAX_OPEN_SESSIONS_PER_SELLER, 0, 10_000_000);
  positiveInt('MAX_AMOUNT_SHARE_PERCENT', parsed.MAX_AMOUNT_SHARE_PERCENT, 1, 100);
  if (problems.length > 0) throw new ConfigError(`invalid configuration: ${problems.join('; ')}`);
  productionGuards(env, {
    serviceName: common.serviceName,
    production: common.production,
    escrow: { address: escrowAddress },
    secrets: ['OPERATOR_TOKEN'],
  });
  if (common.production) productionDeposit(env, checkoutEscrowAddress, escrowAddress);
  return {
    ...common,
    escrowAddress,
    checkoutEscrowAddress,
    network,
    chainId,
    usdcAddress,
    sessionTtlSeconds: parsed.SESSION_TTL_SECONDS,
    lateWindowSeconds: parsed.LATE_WINDOW_SECONDS,
    amountSuffixRangeMicro: parsed.AMOUNT_SUFFIX_RANGE_MICRO,
    amountSuffixPercent: parsed.AMOUNT_SUFFIX_PERCENT,
    amountSuffixMaxRangeMicro: Math.max(
      parsed.AMOUNT_SUFFIX_MAX_RANGE_MICRO,
      parsed.AMOUNT_SUFFIX_RANGE_MICRO,
    ),
    sessionRateLimitPerKey: parsed.SESSION_RATE_LIMIT_PER_KEY,
    sessionRateLimitPerClient: parsed.SESSION_RATE_LIMIT_PER_CLIENT,
    maxOpenSessionsPerSeller: parsed.MAX_OPEN_SESSIONS_PER_SELLER,
    maxAmountSharePercent: parsed.MAX_AMOUNT_SHARE_PERCENT,
    defaultHoldPeriodHours: parsed.DEFAULT_HOLD_PERIOD_HOURS,
    sweepIntervalMs: parsed.SWEEP_INTERVAL_MS,
    operatorToken: parsed.OPERATOR_TOKEN,
    projectionCacheTtlMs: parsed.PROJECTION_CACHE_TTL_MS,
    now,
  };
}
