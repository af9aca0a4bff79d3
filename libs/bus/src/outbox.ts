import { type EventEnvelope, validateEvent } from '@paygate/contracts';
import type { Logger } from '@paygate/telemetry';
import { type Kysely, sql, type Transaction } from 'kysely';
import { headers as natsHeaders } from 'nats';
import type { Bus } from './connection';
import { PollingLoop } from './polling-loop';
import type { BusTables } from './tables';

const encoder = new TextEncoder();

/**
 * Writes an event into the outbox in the caller's transaction: it is published only if that transaction
 * commits, and nothing committed is lost if the process dies before the relay runs.
 */
export async function enqueueEvent(trx: Transaction<any>, envelope: EventEnvelope): Promise<void> {
  validateEvent(envelope);
  await (trx as unknown as Transaction<BusTables>)
    .insertInto('outbox')
    .values({
      id: envelope.id,
      subject: envelope.type,
      envelope: JSON.stringify(envelope),
      published_at: null,
    })
    .execute();
}

export interface OutboxRelayOptions {
  batchSize?: number;
  pollIntervalMs?: number;
  publishTimeoutMs?: number;
  /** Published rows older than this are deleted; JetStream's dedupe window is far shorter. */
  retainPublishedHours?: number;
}

/**
 * Publishes outbox rows to JetStream with Nats-Msg-Id = event id. Several replicas may run: rows are
 * claimed with FOR UPDATE SKIP LOCKED, and a row published twice (crash before marking) is dropped
 * by JetStream's duplicate window and, past it, by every consumer's inbox.
 */
export class OutboxRelay {
  private lastCleanup = 0;
  private readonly loop: PollingLoop;
  readonly options: Required<OutboxRelayOptions>;

  constructor(
    private readonly db: Kysely<any>,
    private readonly bus: Bus,
    private readonly logger: Logger,
    options: OutboxRelayOptions = {},
  ) {
    this.options = {
      batchSize: options.batchSize ?? 200,
      pollIntervalMs: options.pollIntervalMs ?? 250,
      publishTimeoutMs: options.publishTimeoutMs ?? 5000,
      retainPublishedHours: options.retainPublishedHours ?? 24,
    };
    this.loop = new PollingLoop(
      async () => {
        const published = await this.publishBatch();
        await this.cleanup();
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

  /** Ask for a pass now (after a commit that enqueued events) instead of waiting for the poll. */
  kick(): void {
    this.loop.kick();
  }

  async stop(): Promise<void> {
    await this.loop.stop();
  }

  /** One bounded pass: claim up to batchSize rows, publish them in order, mark them published. */
  async publishBatch(): Promise<number> {
    const db = this.db as Kysely<BusTables>;
    return db.transaction().execute(async (trx) => {
      const rows = await trx
        .selectFrom('outbox')
        .select(['id', 'subject', 'envelope'])
        .where('published_at', 'is', null)
        .orderBy('id')
        .limit(this.options.batchSize)
        .forUpdate()
        .skipLocked()
        .execute();
      if (rows.length === 0) return 0;
      const publishes = rows.map((row) => {
        const envelope = row.envelope as EventEnvelope;
        const headers = natsHeaders();
        if (envelope.trace?.traceparent) headers.set('traceparent', envelope.trace.traceparent);
        if (envelope.trace?.tracestate) headers.set('tracestate', envelope.trace.tracestate);
        headers.set('Paygate-Event-Type', envelope.type);
        return this.bus.js.publish(
          this.bus.subjectFor(row.subject),
          encoder.encode(JSON.stringify(envelope)),
          {
            msgID: row.id,
            headers,
            timeout: this.options.publishTimeoutMs,
          },
        );
      });
      const results = await Promise.allSettled(publishes);
      const publishedIds = rows.filter((_, i) => results[i]!.status === 'fulfilled').map((r) => r.id);
      const failed = results.find((r) => r.status === 'rejected') as PromiseRejectedResult | undefined;
      if (publishedIds.length > 0) {
        await trx
          .updateTable('outbox')
          .set({ published_at: new Date() })
          .where('id', 'in', publishedIds)
          .execute();
      }
      if (failed) {
        const failedIds = rows.filter((_, i) => results[i]!.status === 'rejected').map((r) => r.id);
        await trx
          .updateTable('outbox')
          .set((eb) => ({ attempts: eb('attempts', '+', 1) }))
          .where('id', 'in', failedIds)
          .execute();
        this.logger.warn(
          { err: failed.reason, failed: failedIds.length },
          'outbox publish failed; will retry',
        );
      }
      return publishedIds.length;
    });
  }

  private async cleanup(): Promise<void> {
    if (Date.now() - this.lastCleanup < 60_000) return;
    this.lastCleanup = Date.now();
    await sql`delete from outbox where id in (select id from outbox where published_at < now() - make_interval(hours => ${this.options.retainPublishedHours}) limit 1000)`.execute(
      this.db,
    );
  }

  /** Rows waiting to be published: a readiness and metrics signal. */
  async backlog(): Promise<number> {
    const row = await (this.db as Kysely<BusTables>)
      .selectFrom('outbox')
      .select((eb) => eb.fn.countAll<string>().as('count'))
      .where('published_at', 'is', null)
      .executeTakeFirstOrThrow();
    return Number(row.count);
  }
}
