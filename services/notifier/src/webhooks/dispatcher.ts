import { performance } from 'node:perf_hooks';
import {
  signWebhook,
  WEBHOOK_EVENT_ID_HEADER,
  WEBHOOK_EVENT_TYPE_HEADER,
  WEBHOOK_SIGNATURE_HEADER,
} from '@paygate/gateway-middleware';
import { type HostResolver, type SellerFetch, sellerFetch } from '@paygate/net';
import {
  type BackgroundTask,
  backoffDelayMs,
  Counter,
  PolledTask,
  PollingLoop,
  type Registry,
} from '@paygate/runtime';
import type { Logger } from '@paygate/telemetry';
import type { Kysely } from 'kysely';
import type { NotifierConfig } from '../config';
import type { NotifierDatabase } from '../db';
import { SecretUnavailableError, type WebhookSecrets } from '../sellers/secrets';
import { endpointSecret } from './endpoint-secret';
import {
  type AttemptResult,
  type ClaimedDelivery,
  claimDueDeliveries,
  postponeDelivery,
  recordAttempt,
} from './repository';
import { classifyStatus, MAX_WEBHOOK_ATTEMPTS } from './schedule';

const RESPONSE_EXCERPT_BYTES = 1024;
const USER_AGENT = 'Paygate-Webhooks/1';

export interface DispatcherDependencies {
  db: Kysely<NotifierDatabase>;
  secrets: WebhookSecrets;
  logger: Logger;
  config: NotifierConfig;
  registry: Registry;
  random?: () => number;
  /** Stands in for DNS when connecting to webhook URLs (tests). */
  resolveHost?: HostResolver;
  /** Told after each recorded attempt (the live channel tells the seller's open dashboards). */
  onAttempt?: (sellerId: string, deliveryId: string, attemptedAt: Date) => void;
}

/**
 * Sends due webhook deliveries. Several replicas may run it: claims use SKIP LOCKED and a lease.
 * Work is bounded per pass (batch size, concurrency, per-request timeout); a commit that created a
 * delivery kicks a pass at once, otherwise it polls.
 */
export class WebhookDispatcher extends PolledTask implements BackgroundTask {
  private readonly attempts: Counter<'outcome'>;
  protected readonly loop: PollingLoop;
  /** Every delivery goes through it: in production a host resolving to a non-public address is refused at connect. */
  private readonly sellers: SellerFetch;

  constructor(private readonly deps: DispatcherDependencies) {
    super();
    this.sellers = sellerFetch({ publicOnly: deps.config.production, resolve: deps.resolveHost });
    this.attempts = new Counter({
      name: 'notifier_webhook_attempts_total',
      help: 'Webhook delivery attempts by outcome',
      labelNames: ['outcome'],
      registers: [deps.registry],
    });
    this.loop = new PollingLoop(async () => (await this.runOnce()) >= deps.config.webhookBatchSize, {
      what: 'webhook dispatch pass',
      logger: deps.logger,
      intervalMs: deps.config.webhookPollIntervalMs,
    });
  }

  /** Once no pass runs: the connections to sellers' webhook URLs. (kick(): a delivery was just created.) */
  protected override async afterStop(): Promise<void> {
    await this.sellers.close();
  }

  /** One bounded pass: claim due deliveries and attempt each. Returns how many were claimed. */
  async runOnce(): Promise<number> {
    const { config, db } = this.deps;
    const claimed = await claimDueDeliveries(db, {
      now: config.now(),
      leaseMs: config.webhookClaimLeaseMs,
      limit: config.webhookBatchSize,
    });
    const queue = [...claimed];
    const workers = Array.from({ length: Math.min(config.webhookConcurrency, queue.length) }, async () => {
      for (let next = queue.shift(); next; next = queue.shift()) {
        await this.deliver(next).catch((error) =>
          this.deps.logger.error(
            { err: error, deliveryId: next?.deliveryId },
            'webhook delivery bookkeeping failed',
          ),
        );
      }
    });
    await Promise.all(workers);
    return claimed.length;
  }

  private async deliver(delivery: ClaimedDelivery): Promise<void> {
    const { config, db, logger } = this.deps;
    let secret: string;
    try {
      const accountSecret = (await this.deps.secrets.get(delivery.sellerId, delivery.secretVersion)).secret;
      secret = delivery.endpoint
        ? endpointSecret(accountSecret, delivery.endpoint.id, delivery.endpoint.secretVersion)
        : accountSecret;
    } catch (error) {
      if (!(error instanceof SecretUnavailableError)) throw error;
      const now = config.now();
      logger.warn(
        { deliveryId: delivery.deliveryId, reason: error.message },
        'webhook postponed: no signing secret',
      );
      await postponeDelivery(db, delivery, {
        now,
        retryAt: new Date(now.getTime() + config.webhookRetryBaseDelayMs),
        reason: 'signing secret unavailable; nothing was sent',
      });
      return;
    }

    const attemptedAt = config.now();
    const result = await this.post(delivery, secret, attemptedAt);
    this.attempts.inc({ outcome: result.outcome });
    // The retry after this attempt, or none once the attempts are spent (the delivery fails).
    const retryDelay = backoffDelayMs(
      delivery.attemptCount + 1,
      {
        baseMs: config.webhookRetryBaseDelayMs,
        maxMs: config.webhookRetryMaxDelayMs,
        maxAttempts: MAX_WEBHOOK_ATTEMPTS,
      },
      this.deps.random,
    );
    const retryAt = retryDelay === undefined ? null : new Date(attemptedAt.getTime() + retryDelay);
    const status = await recordAttempt(db, delivery, result, { attemptedAt, retryAt });
    this.deps.onAttempt?.(delivery.sellerId, delivery.deliveryId, attemptedAt);
    logger.info(
      {
        deliveryId: delivery.deliveryId,
        eventId: delivery.eventId,
        attempt: delivery.attemptCount + 1,
        statusCode: result.statusCode,
        outcome: result.outcome,
        status,
      },
      'webhook attempt',
    );
  }

  private async post(delivery: ClaimedDelivery, secret: string, attemptedAt: Date): Promise<AttemptResult> {
    const started = performance.now();
    const signature = signWebhook({
      payload: delivery.body,
      secret,
      timestamp: Math.floor(attemptedAt.getTime() / 1000),
    });
    try {
      const response = await this.sellers.fetch(delivery.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': USER_AGENT,
          [WEBHOOK_SIGNATURE_HEADER]: signature,
          [WEBHOOK_EVENT_ID_HEADER]: delivery.eventId,
          [WEBHOOK_EVENT_TYPE_HEADER]: delivery.eventType,
          'Paygate-Delivery-Id': delivery.deliveryId,
        },
        body: delivery.body,
        redirect: 'manual',
        signal: AbortSignal.timeout(this.deps.config.webhookTimeoutMs),
      });
      const excerpt = await readExcerpt(response).catch(() => null);
      const outcome = classifyStatus(response.status);
      return {
        outcome,
        statusCode: response.status,
        error: outcome === 'delivered' ? null : `HTTP ${response.status}`,
        responseExcerpt: excerpt,
        durationMs: performance.now() - started,
      };
    } catch (error) {
      return {
        outcome: 'retryable',
        statusCode: null,
        error: describeFetchError(error, this.deps.config.webhookTimeoutMs),
        responseExcerpt: null,
        durationMs: performance.now() - started,
      };
    }
  }
}

/** The first bytes of the response body, for the seller's attempt log; the rest is not read. */
async function readExcerpt(response: Awaited<ReturnType<SellerFetch['fetch']>>): Promise<string | null> {
  if (!response.body) return null;
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < RESPONSE_EXCERPT_BYTES) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.length;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  const text = Buffer.concat(chunks).subarray(0, RESPONSE_EXCERPT_BYTES).toString('utf8');
  return text.length > 0 ? text : null;
}

function describeFetchError(error: unknown, timeoutMs: number): string {
  const e = error as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e?.name === 'TimeoutError' || e?.name === 'AbortError')
    return `timeout: no response within ${timeoutMs} ms`;
  // The production address rule explains itself; other causes are best named by their code.
  const cause =
    e?.cause?.code === 'ERR_FORBIDDEN_ADDRESS' ? e.cause.message : (e?.cause?.code ?? e?.cause?.message);
  return `network error: ${cause ?? e?.message ?? String(error)}`.slice(0, 500);
}
