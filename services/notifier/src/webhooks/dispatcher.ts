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
  Gauge,
  type PassOutcome,
  PolledTask,
  PollingLoop,
  type Registry,
} from '@paygate/runtime';
import { type Logger, SpanKind, withSpan } from '@paygate/telemetry';
import type { Kysely } from 'kysely';
import type { NotifierConfig } from '../config';
import type { NotifierDatabase } from '../db';
import { SecretUnavailableError } from '../errors';
import type { WebhookSecrets } from '../sellers/secrets';
import { type CircuitTransition, openCircuitCount } from './circuits';
import { type ClaimedDelivery, claimFairly, failExpiredHeld } from './claim';
import { endpointSecret } from './endpoint-secret';
import { type AttemptResult, postponeDelivery, recordAttempt } from './repository';
import { classifyStatus, MAX_WEBHOOK_ATTEMPTS } from './schedule';

const RESPONSE_EXCERPT_BYTES = 1024;
/** Deliveries whose window ended behind an open circuit, failed per pass at the most. */
const EXPIRED_HELD_PER_PASS = 500;
const USER_AGENT = 'Paygate-Webhooks/1';

interface DispatcherDependencies {
  db: Kysely<NotifierDatabase>;
  secrets: WebhookSecrets;
  logger: Logger;
  config: NotifierConfig;
  registry: Registry;
  random?: () => number;
  resolveHost?: HostResolver;
  /** Told after each recorded attempt (the seller's open dashboards hear it). */
  onAttempt?: (sellerId: string, deliveryId: string, attemptedAt: Date) => void;
}

/** Sends due deliveries on `webhookConcurrency` slots, claiming fairly (claim.ts) for the free ones. */
export class WebhookDispatcher extends PolledTask implements BackgroundTask {
  private readonly attempts: Counter<'outcome'>;
  private readonly transitions: Counter<'to'>;
  protected readonly loop: PollingLoop;
  /** Every delivery goes through it: in production a host resolving to a non-public address is refused at connect. */
  private readonly sellers: SellerFetch;
  private readonly inFlight = new Set<Promise<void>>();
  /** The seller the last pass ended on (round robin over sellers). */
  private cursor: string | null = null;

  constructor(private readonly deps: DispatcherDependencies) {
    super();
    const { config } = deps;
    this.sellers = sellerFetch({ publicOnly: config.production, resolve: deps.resolveHost });
    this.attempts = new Counter({
      name: 'notifier_webhook_attempts_total',
      help: 'Webhook delivery attempts by outcome',
      labelNames: ['outcome'],
      registers: [deps.registry],
    });
    this.transitions = new Counter({
      name: 'notifier_webhook_circuit_transitions_total',
      help: 'Webhook target circuits opened, half-opened (a probe sent) and closed',
      labelNames: ['to'],
      registers: [deps.registry],
    });
    const inFlight = this.inFlight;
    new Gauge({
      name: 'notifier_webhook_in_flight',
      help: 'Webhook deliveries this replica is sending now',
      registers: [deps.registry],
      collect() {
        this.set(inFlight.size);
      },
    });
    const db = deps.db;
    new Gauge({
      name: 'notifier_webhook_circuits_open',
      help: 'Webhook targets whose circuit is open or half-open (every replica)',
      registers: [deps.registry],
      async collect() {
        this.set(await openCircuitCount(db).catch(() => Number.NaN));
      },
    });
    this.loop = new PollingLoop(() => this.pass(), {
      what: 'webhook dispatch pass',
      logger: deps.logger,
      intervalMs: config.webhookPollIntervalMs,
    });
  }

  /** Once no pass runs: the deliveries still being sent (each within its timeout), then the connections. */
  protected override async afterStop(): Promise<void> {
    await Promise.allSettled([...this.inFlight]);
    await this.sellers.close();
  }

  private freeSlots(): number {
    const { config } = this.deps;
    return Math.min(config.webhookBatchSize, config.webhookConcurrency - this.inFlight.size);
  }

  /** One pass: fail what expired behind an open circuit, claim for the free slots and start sending. */
  private async pass(): Promise<PassOutcome> {
    const { config, db, logger } = this.deps;
    const requested = this.freeSlots();
    const now = config.now();
    const expired = await failExpiredHeld(db, { now, limit: EXPIRED_HELD_PER_PASS });
    if (expired > 0)
      logger.warn({ count: expired }, 'webhook deliveries failed: retry window ended behind an open circuit');
    const limit = this.freeSlots();
    if (limit <= 0) return false;
    const claim = await claimFairly(db, { ...config, now, limit, after: this.cursor });
    this.cursor = claim.cursor;
    if (claim.probes > 0) this.transitions.inc({ to: 'half_open' }, claim.probes);
    for (const delivery of claim.deliveries) {
      const sending: Promise<void> = this.deliver(delivery)
        .catch((error) =>
          logger.error(
            { err: error, deliveryId: delivery.deliveryId },
            'webhook delivery bookkeeping failed',
          ),
        )
        .finally(() => {
          this.inFlight.delete(sending);
          this.kick();
        });
      this.inFlight.add(sending);
    }
    // A full claim with slots left: more may be waiting. Otherwise a freed slot or a new delivery kicks.
    return requested > 0 && claim.deliveries.length >= requested && this.freeSlots() > 0;
  }

  private async deliver(delivery: ClaimedDelivery): Promise<void> {
    const { config, db, logger } = this.deps;
    const secret = await this.signingSecret(delivery);
    if (secret === undefined) return;
    const attemptedAt = config.now();
    const result = await withSpan(
      `webhook ${delivery.eventType}`,
      {
        kind: SpanKind.CLIENT,
        carrier: { traceparent: delivery.traceparent ?? undefined },
        attributes: {
          'paygate.webhook.delivery_id': delivery.deliveryId,
          'paygate.webhook.attempt': delivery.attemptCount + 1,
        },
      },
      async (span) => {
        const attempt = await this.post(delivery, secret, attemptedAt);
        span.setAttribute('paygate.webhook.outcome', attempt.outcome);
        if (attempt.statusCode !== null) span.setAttribute('http.response.status_code', attempt.statusCode);
        return attempt;
      },
    );
    this.attempts.inc({ outcome: result.outcome });
    // None once the attempts are spent: the delivery fails.
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
    const { status, circuit } = await recordAttempt(db, delivery, result, {
      attemptedAt,
      retryAt,
      breaker: config,
    });
    this.noteCircuit(delivery, circuit);
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

  /** The delivery's signing secret; undefined when the registry could not give it (the delivery is postponed). */
  private async signingSecret(delivery: ClaimedDelivery): Promise<string | undefined> {
    const { config, db, logger } = this.deps;
    try {
      const accountSecret = (await this.deps.secrets.get(delivery.sellerId, delivery.secretVersion)).secret;
      return delivery.endpoint
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
      return undefined;
    }
  }

  private noteCircuit(delivery: ClaimedDelivery, circuit: CircuitTransition): void {
    if (circuit === null) return;
    this.transitions.inc({ to: circuit });
    this.deps.logger.warn(
      { sellerId: delivery.sellerId, endpointId: delivery.endpoint?.id ?? null, circuit },
      circuit === 'open'
        ? 'webhook target circuit opened: its deliveries are held until a probe succeeds'
        : 'webhook target circuit closed',
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
