import { commonConfig, int, parseEnv, settingsByName, throwIfProblems } from '@paygate/runtime';

/** Parses the environment once; throws a ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env) {
  const common = commonConfig(env, { serviceName: 'notifier', schema: 'notifier', port: 8087 });
  const parsed = parseEnv(env, {
    WEBHOOK_TIMEOUT_MS: int({ default: 10_000, min: 1 }),
    WEBHOOK_RETRY_BASE_DELAY_MS: int({ default: 30_000, min: 1 }),
    WEBHOOK_RETRY_MAX_DELAY_MS: int({ default: 6 * 60 * 60 * 1000, min: 1 }),
    WEBHOOK_RETRY_WINDOW_HOURS: int({ default: 72, min: 1 }),
    WEBHOOK_POLL_INTERVAL_MS: int({ default: 1000, min: 1 }),
    WEBHOOK_BATCH_SIZE: int({ default: 32, min: 1, max: 1000 }),
    WEBHOOK_CONCURRENCY: int({ default: 32, min: 2, max: 1000 }),
    WEBHOOK_SELLER_SHARE: int({ default: 4, min: 1 }),
    WEBHOOK_ENDPOINT_SHARE: int({ default: 2, min: 1 }),
    WEBHOOK_SELLER_MAX_IN_FLIGHT: int({ default: 8, min: 1 }),
    WEBHOOK_ENDPOINT_MAX_IN_FLIGHT: int({ default: 4, min: 1 }),
    WEBHOOK_BREAKER_FAILURE_THRESHOLD: int({ default: 5, min: 1, max: 1000 }),
    WEBHOOK_BREAKER_COOLDOWN_MS: int({ default: 30_000, min: 1 }),
    WEBHOOK_BREAKER_MAX_COOLDOWN_MS: int({ default: 10 * 60 * 1000, min: 1 }),
    WEBHOOK_CLAIM_LEASE_MS: int({ default: 60_000, min: 1 }),
    SECRET_REQUEST_TIMEOUT_MS: int({ default: 2000, min: 1 }),
    WS_MAX_SUBSCRIPTIONS_PER_SOCKET: int({ default: 10, min: 1 }),
    WS_MAX_PAYLOAD_BYTES: int({ default: 4096, min: 1 }),
    WS_MAX_SOCKETS: int({ default: 10_000, min: 1 }),
    WS_MAX_SOCKETS_PER_CLIENT: int({ default: 20, min: 1 }),
    WS_HEARTBEAT_INTERVAL_MS: int({ default: 30_000, min: 1 }),
    WS_IDLE_TIMEOUT_MS: int({ default: 120_000, min: 1 }),
    MANUAL_DELIVERIES_PER_MINUTE: int({ default: 20, min: 1 }),
  });
  const problems: string[] = [];
  if (parsed.WEBHOOK_CLAIM_LEASE_MS <= parsed.WEBHOOK_TIMEOUT_MS)
    problems.push('WEBHOOK_CLAIM_LEASE_MS must exceed WEBHOOK_TIMEOUT_MS');
  // One seller may never hold every sending slot of a replica, nor one of its targets more than the seller.
  if (parsed.WEBHOOK_SELLER_MAX_IN_FLIGHT >= parsed.WEBHOOK_CONCURRENCY)
    problems.push('WEBHOOK_SELLER_MAX_IN_FLIGHT must be below WEBHOOK_CONCURRENCY');
  if (parsed.WEBHOOK_ENDPOINT_MAX_IN_FLIGHT > parsed.WEBHOOK_SELLER_MAX_IN_FLIGHT)
    problems.push('WEBHOOK_ENDPOINT_MAX_IN_FLIGHT must not exceed WEBHOOK_SELLER_MAX_IN_FLIGHT');
  if (parsed.WEBHOOK_SELLER_SHARE > parsed.WEBHOOK_SELLER_MAX_IN_FLIGHT)
    problems.push('WEBHOOK_SELLER_SHARE must not exceed WEBHOOK_SELLER_MAX_IN_FLIGHT');
  if (parsed.WEBHOOK_ENDPOINT_SHARE > parsed.WEBHOOK_SELLER_SHARE)
    problems.push('WEBHOOK_ENDPOINT_SHARE must not exceed WEBHOOK_SELLER_SHARE');
  if (parsed.WEBHOOK_BREAKER_MAX_COOLDOWN_MS < parsed.WEBHOOK_BREAKER_COOLDOWN_MS)
    problems.push('WEBHOOK_BREAKER_MAX_COOLDOWN_MS must not be below WEBHOOK_BREAKER_COOLDOWN_MS');
  throwIfProblems(problems);
  return {
    ...common,
    ...settingsByName(parsed),
    // Tests move time without sleeping; not read from the environment.
    now: (): Date => new Date(),
  };
}

export type NotifierConfig = ReturnType<typeof loadConfig>;
