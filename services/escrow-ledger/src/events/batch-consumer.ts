import { backoffDelayMs } from '@paygate/bus';
import { type EventData, type EventEnvelope, type Subject, validateEvent } from '@paygate/contracts';
import type { BackgroundTask, ServiceContext } from '@paygate/runtime';
import { sql, type Transaction } from 'kysely';
import { AckPolicy, type ConsumerMessages, DeliverPolicy, type JsMsg, headers as natsHeaders } from 'nats';

const decoder = new TextDecoder();

export interface BatchConsumerOptions<S extends Subject> {
  durable: string;
  subject: S;
  /** Books the fresh (never seen) events of a batch, in delivery order, inside the batch's transaction. */
  batchHandler: (trx: Transaction<any>, events: Array<EventEnvelope<S, EventData<S>>>) => Promise<void>;
  /** Most events booked in one database transaction. */
  batchSize: number;
  /** Batches in flight at once (each its own transaction). */
  concurrency: number;
  maxAttempts?: number;
  baseBackoffMs?: number;
  maxBackoffMs?: number;
  ackWaitMs?: number;
}

/**
 * A durable JetStream consumer like the bus library's InboxConsumer, but it books whatever has arrived (up to
 * `batchSize` events) in ONE transaction: the inbox rows and every handler's effect commit together, so a
 * redelivered event is still a no-op while the hot ledger accounts are locked and fsynced once per batch
 * instead of once per event. Under light load a batch is a single event, so nothing waits for a batch to
 * fill. If a batch fails, its events are retried one transaction each, so one bad event never blocks others.
 */
export class BatchInboxConsumer<S extends Subject> implements BackgroundTask {
  private messages: ConsumerMessages | undefined;
  private readonly buffer: JsMsg[] = [];
  private waiters: Array<() => void> = [];
  private stopped = false;
  private workers: Promise<void>[] = [];
  private reader: Promise<void> | undefined;
  private readonly options: Required<BatchConsumerOptions<S>>;

  constructor(
    private readonly ctx: ServiceContext,
    options: BatchConsumerOptions<S>,
  ) {
    this.options = {
      maxAttempts: 8,
      baseBackoffMs: 500,
      maxBackoffMs: 60_000,
      ackWaitMs: 30_000,
      ...options,
    };
  }

  async start(): Promise<void> {
    const { jsm, js, eventsStream } = this.ctx.bus;
    const o = this.options;
    try {
      await jsm.consumers.info(eventsStream, o.durable);
    } catch {
      await jsm.consumers
        .add(eventsStream, {
          durable_name: o.durable,
          ack_policy: AckPolicy.Explicit,
          deliver_policy: DeliverPolicy.All,
          filter_subject: this.ctx.bus.subjectFor(o.subject),
          ack_wait: o.ackWaitMs * 1_000_000,
          max_deliver: o.maxAttempts + 2,
          max_ack_pending: Math.max(1000, o.batchSize * o.concurrency * 4),
        })
        .catch((error: Error) => {
          if (!/already in use|exists/.test(error.message)) throw error;
        });
    }
    const consumer = await js.consumers.get(eventsStream, o.durable);
    this.messages = await consumer.consume({ max_messages: Math.max(64, o.batchSize * o.concurrency * 2) });
    const messages = this.messages;
    this.reader = (async () => {
      for await (const message of messages) {
        this.buffer.push(message);
        this.wakeAll();
      }
    })().catch((error) => this.ctx.logger.error({ err: error }, 'batch consumer reader stopped'));
    this.workers = Array.from({ length: o.concurrency }, () => this.work());
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.messages?.stop();
    this.wakeAll();
    await this.reader;
    await Promise.allSettled(this.workers);
  }

  private async work(): Promise<void> {
    while (!this.stopped) {
      if (this.buffer.length === 0) {
        await new Promise<void>((resolve) => this.waiters.push(resolve));
        continue;
      }
      const batch = this.buffer.splice(0, this.options.batchSize);
      await this.processBatch(batch).catch((error) =>
        this.ctx.logger.error({ err: error }, 'batch processing failed unexpectedly'),
      );
    }
  }

  private wakeAll(): void {
    for (const resolve of this.waiters.splice(0)) resolve();
  }

  private decode(message: JsMsg): EventEnvelope<S, EventData<S>> | Error {
    try {
      return validateEvent(JSON.parse(decoder.decode(message.data))) as EventEnvelope<S, EventData<S>>;
    } catch (error) {
      return error as Error;
    }
  }

  private async processBatch(batch: JsMsg[]): Promise<void> {
    const valid: Array<[JsMsg, EventEnvelope<S, EventData<S>>]> = [];
    for (const message of batch) {
      const decoded = this.decode(message);
      if (decoded instanceof Error) await this.deadLetter(message, decoded);
      else valid.push([message, decoded]);
    }
    if (valid.length === 0) return;
    const startedAt = Date.now();
    try {
      await this.ctx.db.transaction().execute(async (trx) => {
        // Sorted, so two batches holding the same redelivered events take their inbox keys in one order.
        const ids = [...new Set(valid.map(([, e]) => e.id))].sort();
        const inserted = await sql<{ event_id: string }>`insert into inbox (consumer, event_id)
            select ${this.options.durable}, id from unnest(${ids}::text[]) id order by id
            on conflict do nothing returning event_id`.execute(trx);
        const fresh = new Set(inserted.rows.map((r) => r.event_id));
        // Events seen before (or twice in this batch) are skipped: their effect is already committed.
        const events = valid.map(([, envelope]) => envelope).filter((envelope) => fresh.delete(envelope.id));
        await this.options.batchHandler(trx, events);
      });
    } catch (error) {
      if (valid.length === 1) {
        this.retryLater(valid[0]![0], valid[0]![1], error as Error);
        return;
      }
      this.ctx.logger.warn({ err: error, size: valid.length }, 'batch failed; booking its events one by one');
      for (const [message] of valid) await this.processBatch([message]);
      return;
    }
    for (const [message] of valid) message.ack();
    this.ctx.logger.debug(
      { consumer: this.options.durable, size: valid.length, ms: Date.now() - startedAt },
      'batch booked',
    );
    this.ctx.metrics.eventsHandled.inc({ consumer: this.options.durable, outcome: 'ok' }, valid.length);
    this.ctx.relay.kick();
  }

  private retryLater(message: JsMsg, envelope: EventEnvelope, error: Error): void {
    const attempt = message.info.redeliveryCount;
    if (attempt >= this.options.maxAttempts) {
      void this.deadLetter(message, error);
      return;
    }
    const delayMs = backoffDelayMs(attempt, this.options.baseBackoffMs, this.options.maxBackoffMs);
    this.ctx.logger.warn(
      { err: error, eventId: envelope.id, consumer: this.options.durable, attempt, delayMs },
      'event handler failed; will redeliver',
    );
    message.nak(delayMs);
  }

  private async deadLetter(message: JsMsg, error: Error): Promise<void> {
    const headers = natsHeaders();
    headers.set('Paygate-Original-Subject', message.subject);
    headers.set('Paygate-Consumer', this.options.durable);
    headers.set('Paygate-Error', error.message.slice(0, 500).replace(/[\r\n]+/g, ' '));
    headers.set('Paygate-Attempts', String(message.info.redeliveryCount));
    try {
      await this.ctx.bus.js.publish(this.ctx.bus.deadLetterSubject(this.options.durable), message.data, {
        headers,
        msgID: `${this.options.durable}:${message.info.streamSequence}`,
      });
      this.ctx.logger.error(
        { consumer: this.options.durable, err: error },
        'event moved to the dead-letter subject',
      );
      message.term();
    } catch (publishError) {
      this.ctx.logger.error({ err: publishError }, 'could not dead-letter an event; will redeliver');
      message.nak(this.options.maxBackoffMs);
    }
  }
}
