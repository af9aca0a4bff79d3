import { type EventEnvelope, validateEvent } from '@paygate/contracts';
import { currentTraceCarrier, type Logger } from '@paygate/telemetry';
import { type Kysely, type RawBuilder, sql, type Transaction } from 'kysely';
import { headers as natsHeaders } from 'nats';
import type { Bus } from './connection';
import { BusError } from './errors';
import { PollingLoop } from './polling-loop';
import { publishDurably } from './publish';
import type { BusTables } from './tables';
import { settleWithin } from './timeout';

const encoder = new TextEncoder();

/**
 * The largest event the outbox takes, in bytes of its JSON: well under nats-server's default max_payload (1 MiB,
 * headers included). A larger one could never be published, and its row would hold up every row behind it.
 */
export const MAX_EVENT_BYTES = 768 * 1024;

/** An event over MAX_EVENT_BYTES: refused before it is written, so the caller's transaction rolls back. */
export class EventTooLargeError extends BusError {
  override name = 'EventTooLargeError';
  constructor(
    readonly subject: string,
    readonly bytes: number,
  ) {
    super(`a ${subject} event of ${bytes} bytes is over the ${MAX_EVENT_BYTES} bytes an event may carry`);
  }
}

/**
 * Writes an event into the outbox in the caller's transaction, so it is published exactly when that commits.
 * An event without a trace context gets the active one, stored with it for the relay to publish in its headers.
 */
export async function enqueueEvent<DB>(trx: Transaction<DB>, event: EventEnvelope): Promise<void> {
  const envelope = withCurrentTrace(event);
  validateEvent(envelope);
  const json = JSON.stringify(envelope);
  // Bytes, not characters: a UTF-16 unit is at most 3 bytes of UTF-8, so only a long event is counted.
  if (json.length * 3 > MAX_EVENT_BYTES) {
    const bytes = Buffer.byteLength(json);
    if (bytes > MAX_EVENT_BYTES) throw new EventTooLargeError(envelope.type, bytes);
  }
  await (trx as unknown as Transaction<BusTables>)
    .insertInto('outbox')
    .values({ id: envelope.id, subject: envelope.type, envelope: json, published_at: null })
    .execute();
}

/** The envelope with the active trace context, unless it carries one already (or none is active). */
function withCurrentTrace(envelope: EventEnvelope): EventEnvelope {
  if (envelope.trace?.traceparent) return envelope;
  const carrier = currentTraceCarrier();
  if (!carrier.traceparent) return envelope;
  const { traceparent, tracestate } = carrier;
  return { ...envelope, trace: { traceparent, ...(tracestate ? { tracestate } : {}) } };
}

export interface OutboxRelayOptions {
  batchSize?: number;
  pollIntervalMs?: number;
  publishTimeoutMs?: number;
  /** Publishes of one pass awaiting their acks at once (1: strictly one after another). */
  publishInFlight?: number;
  /** How long one row's publish is retried (same Nats-Msg-Id) before the pass ends; past a leader election. */
  publishRetryMs?: number;
  /** Rows deleted per statement, and statements per pruning pass (the next pass goes on). */
  pruneBatchSize?: number;
  pruneMaxBatches?: number;
}

/** Published rows older than this are deleted; JetStream's dedupe window is far shorter. */
const RETAIN_PUBLISHED_HOURS = 24;
/** An event can come back until the dead-letter stream forgets it (30 days, replay): its inbox id outlives that. */
const RETAIN_INBOX_DAYS = 31;
const PRUNE_INTERVAL_MS = 60_000;

/**
 * Publishes outbox rows to JetStream with Nats-Msg-Id = event id. Replicas claim rows FOR UPDATE SKIP LOCKED; a
 * row published twice (crash before marking) is dropped by JetStream's duplicate window, past it by each inbox.
 */
export class OutboxRelay {
  private lastPrune = 0;
  private readonly loop: PollingLoop;
  private soon: NodeJS.Timeout | undefined;
  readonly options: Required<OutboxRelayOptions>;

  constructor(
    private readonly db: Kysely<BusTables>,
    private readonly bus: Bus,
    private readonly logger: Logger,
    options: OutboxRelayOptions = {},
  ) {
    this.options = {
      batchSize: options.batchSize ?? 200,
      pollIntervalMs: options.pollIntervalMs ?? 250,
      publishTimeoutMs: options.publishTimeoutMs ?? 5000,
      publishInFlight: Math.max(1, options.publishInFlight ?? 64),
      publishRetryMs: options.publishRetryMs ?? 30_000,
      pruneBatchSize: options.pruneBatchSize ?? 1000,
      pruneMaxBatches: options.pruneMaxBatches ?? 20,
    };
    this.loop = new PollingLoop(
      async () => {
        const published = await this.publishBatch();
        if (Date.now() - this.lastPrune >= PRUNE_INTERVAL_MS) {
          this.lastPrune = Date.now();
          await this.prune();
        }
        return published >= this.options.batchSize;
      },
      {
        what: 'outbox relay pass',
        logger: this.logger,
        intervalMs: this.options.pollIntervalMs,
        stopWaitMs: 2000,
      },
    );
  }

  start(): void {
    this.loop.start();
  }

  /** A pass now (after a commit that enqueued events) instead of at the poll. */
  kick(): void {
    this.loop.kick();
  }

  /**
   * Runs a pass now and waits for it, at most `timeoutMs` (then a later pass publishes): for an event that must be
   * out before the caller answers (a revoked API key's seller.updated).
   */
  publishNow(timeoutMs = this.options.publishTimeoutMs): Promise<void> {
    return settleWithin(this.loop.runSoon(), timeoutMs);
  }

  /** A pass in `delayMs` (asks meanwhile share it): a hot path's answers go out before its publishing competes. */
  kickSoon(delayMs: number): void {
    if (this.soon) return;
    this.soon = setTimeout(() => {
      this.soon = undefined;
      this.loop.kick();
    }, delayMs);
    this.soon.unref?.();
  }

  async stop(): Promise<void> {
    clearTimeout(this.soon);
    this.soon = undefined;
    await this.loop.stop();
  }

  /**
   * One pass: claims up to batchSize rows, publishes them in id order with up to publishInFlight awaiting acks,
   * marks the published ones. The first failure stops further sends (rows in flight behind it may land first; no
   * consumer relies on order, exactly-once is the Nats-Msg-Id and each inbox).
   */
  async publishBatch(): Promise<number> {
    const db = this.db;
    // An idle pass is this one statement, not BEGIN, a locking select and COMMIT: every relay polls often.
    if (!(await this.hasUnpublished())) return 0;
    return db.transaction().execute(async (trx) => {
      // The stored JSON as text and its trace fields: published as it is, without parsing and writing it again.
      const rows = await trx
        .selectFrom('outbox')
        .select([
          'id',
          'subject',
          sql<string>`envelope::text`.as('body'),
          sql<string | null>`envelope->>'type'`.as('type'),
          sql<string | null>`envelope->'trace'->>'traceparent'`.as('traceparent'),
          sql<string | null>`envelope->'trace'->>'tracestate'`.as('tracestate'),
        ])
        .where('published_at', 'is', null)
        .orderBy('id')
        .limit(this.options.batchSize)
        .forUpdate()
        .skipLocked()
        .execute();
      if (rows.length === 0) return 0;
      const publishedIds: string[] = [];
      const failedIds: string[] = [];
      let next = 0;
      const sender = async () => {
        while (failedIds.length === 0 && next < rows.length) {
          const row = rows[next++]!;
          try {
            await this.publish(row);
            publishedIds.push(row.id);
          } catch (error) {
            failedIds.push(row.id);
            this.logger.warn(
              { err: error, eventId: row.id, waiting: rows.length - publishedIds.length },
              'outbox publish failed; it and the rows not sent yet will be published next pass',
            );
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(this.options.publishInFlight, rows.length) }, sender));
      if (failedIds.length > 0) {
        await trx
          .updateTable('outbox')
          .set((eb) => ({ attempts: eb('attempts', '+', 1) }))
          .where('id', 'in', failedIds)
          .execute();
      }
      if (publishedIds.length > 0) {
        await trx
          .updateTable('outbox')
          .set({ published_at: new Date() })
          .where('id', 'in', publishedIds)
          .execute();
      }
      return publishedIds.length;
    });
  }

  private async hasUnpublished(): Promise<boolean> {
    const found = await sql<{ waiting: boolean }>`
      select exists (select 1 from outbox where published_at is null) as waiting`.execute(this.db);
    return found.rows[0]?.waiting === true;
  }

  private publish(
    row: Record<'id' | 'subject' | 'body', string> &
      Record<'type' | 'traceparent' | 'tracestate', string | null>,
  ) {
    const headers = natsHeaders();
    if (row.traceparent) headers.set('traceparent', row.traceparent);
    if (row.tracestate) headers.set('tracestate', row.tracestate);
    headers.set('Paygate-Event-Type', row.type ?? row.subject);
    return publishDurably(this.bus, this.bus.subjectFor(row.subject), encoder.encode(this.bodyOf(row.body)), {
      msgID: row.id,
      headers,
      attemptTimeoutMs: this.options.publishTimeoutMs,
      retryForMs: this.options.publishRetryMs,
    });
  }

  /** Postgres prints jsonb with spaces after separators, which could push a large event past max_payload. */
  private bodyOf(text: string): string {
    return text.length * 3 > MAX_EVENT_BYTES ? JSON.stringify(JSON.parse(text)) : text;
  }

  /** Deletes published outbox rows and inbox rows past their retention, in bounded batches. */
  async prune(): Promise<{ outbox: number; inbox: number }> {
    return {
      outbox: await this.deleteInBatches(
        sql`select ctid from outbox where published_at < now() - make_interval(hours => ${RETAIN_PUBLISHED_HOURS})`,
        'outbox',
      ),
      inbox: await this.deleteInBatches(
        sql`select ctid from inbox where processed_at < now() - make_interval(days => ${RETAIN_INBOX_DAYS})`,
        'inbox',
      ),
    };
  }

  private async deleteInBatches(select: RawBuilder<unknown>, table: 'outbox' | 'inbox'): Promise<number> {
    const { pruneBatchSize, pruneMaxBatches } = this.options;
    let deleted = 0;
    for (let batch = 0; batch < pruneMaxBatches; batch++) {
      const result = await sql`delete from ${sql.table(table)}
          where ctid = any(array(${select} limit ${pruneBatchSize}))`.execute(this.db);
      const count = Number(result.numAffectedRows ?? 0n);
      deleted += count;
      if (count < pruneBatchSize) break;
    }
    return deleted;
  }

  /** Rows waiting to be published: a readiness and metrics signal. */
  async backlog(): Promise<number> {
    const row = await this.db
      .selectFrom('outbox')
      .select((eb) => eb.fn.countAll<string>().as('count'))
      .where('published_at', 'is', null)
      .executeTakeFirstOrThrow();
    return Number(row.count);
  }
}
