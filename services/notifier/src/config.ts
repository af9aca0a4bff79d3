import { type CommonConfig, ConfigError, commonConfig, int, parseEnv } from '@paygate/runtime';

export interface NotifierConfig extends CommonConfig {
  /** Each webhook POST is abandoned (and retried later) after this long. */
  webhookTimeoutMs: number;
  /** First retry delay; each later one doubles, up to webhookRetryMaxDelayMs. */
  webhookRetryBaseDelayMs: number;
  webhookRetryMaxDelayMs: number;
  /** A delivery that has not succeeded this long after its creation is marked failed. */
  webhookRetryWindowHours: number;
  /** How often the dispatcher looks for due deliveries when nothing woke it. */
  webhookPollIntervalMs: number;
  webhookBatchSize: number;
  webhookConcurrency: number;
  /** How long a claimed delivery stays invisible to other replicas while it is being sent. */
  webhookClaimLeaseMs: number;
  secretRequestTimeoutMs: number;
  wsMaxSubscriptionsPerSocket: number;
  wsMaxPayloadBytes: number;
  wsMaxSockets: number;
  /** Open sockets per client address on one replica (WS_MAX_SOCKETS_PER_CLIENT): one address cannot take them all. */
  wsMaxSocketsPerClient: number;
  wsHeartbeatIntervalMs: number;
  /** A socket with no subscription for this long is closed. */
  wsIdleTimeoutMs: number;
  /**
   * Deliveries a seller asks for by hand (test events and redeliveries) per minute: each is retried for
   * WEBHOOK_RETRY_WINDOW_HOURS from one queue shared by every seller.
   */
  manualDeliveriesPerMinute: number;
  /** Clock: tests move time without sleeping. Not read from the environment. */
  now: () => Date;
}

/** Parses the environment once; throws a ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): NotifierConfig {
  const common = commonConfig(env, { serviceName: 'notifier', schema: 'notifier', port: 8087 });
  const parsed = parseEnv(env, {
    WEBHOOK_TIMEOUT_MS: int({ default: 10_000, min: 1 }),
    WEBHOOK_RETRY_BASE_DELAY_MS: int({ default: 30_000, min: 1 }),
    WEBHOOK_RETRY_MAX_DELAY_MS: int({ default: 6 * 60 * 60 * 1000, min: 1 }),
    WEBHOOK_RETRY_WINDOW_HOURS: int({ default: 72, min: 1 }),
    WEBHOOK_POLL_INTERVAL_MS: int({ default: 1000, min: 1 }),
    WEBHOOK_BATCH_SIZE: int({ default: 20, min: 1 }),
    WEBHOOK_CONCURRENCY: int({ default: 8, min: 1 }),
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
  if (parsed.WEBHOOK_CLAIM_LEASE_MS <= parsed.WEBHOOK_TIMEOUT_MS) {
    throw new ConfigError('invalid configuration: WEBHOOK_CLAIM_LEASE_MS must exceed WEBHOOK_TIMEOUT_MS');
  }
  return {
    ...common,
    webhookTimeoutMs: parsed.WEBHOOK_TIMEOUT_MS,
    webhookRetryBaseDelayMs: parsed.WEBHOOK_RETRY_BASE_DELAY_MS,
    webhookRetryMaxDelayMs: parsed.WEBHOOK_RETRY_MAX_DELAY_MS,
    webhookRetryWindowHours: parsed.WEBHOOK_RETRY_WINDOW_HOURS,
    webhookPollIntervalMs: parsed.WEBHOOK_POLL_INTERVAL_MS,
    webhookBatchSize: parsed.WEBHOOK_BATCH_SIZE,
    webhookConcurrency: parsed.WEBHOOK_CONCURRENCY,
    webhookClaimLeaseMs: parsed.WEBHOOK_CLAIM_LEASE_MS,
    secretRequestTimeoutMs: parsed.SECRET_REQUEST_TIMEOUT_MS,
    wsMaxSubscriptionsPerSocket: parsed.WS_MAX_SUBSCRIPTIONS_PER_SOCKET,
    wsMaxPayloadBytes: parsed.WS_MAX_PAYLOAD_BYTES,
    wsMaxSockets: parsed.WS_MAX_SOCKETS,
    wsMaxSocketsPerClient: parsed.WS_MAX_SOCKETS_PER_CLIENT,
    wsHeartbeatIntervalMs: parsed.WS_HEARTBEAT_INTERVAL_MS,
    wsIdleTimeoutMs: parsed.WS_IDLE_TIMEOUT_MS,
    manualDeliveriesPerMinute: parsed.MANUAL_DELIVERIES_PER_MINUTE,
    now: () => new Date(),
  };
}
