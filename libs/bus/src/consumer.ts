import { type EventData, type EventEnvelope, type Subject, validateEvent } from '@paygate/contracts';
import { type Logger, SpanKind, withSpan } from '@paygate/telemetry';
import { type Kysely, sql, type Transaction } from 'kysely';
import {
  AckPolicy,
  type Consumer,
  type ConsumerMessages,
  DeliverPolicy,
  type JsMsg,
  headers as natsHeaders,
} from 'nats';
import { backoffCeilingMs } from './backoff';
import type { Bus } from './connection';
import { JetStreamErrorCode, unlessJetStreamError } from './errors';

const decoder = new TextDecoder();
const encoder = new TextEncoder();
const ACK_WAIT_MS = 30_000;

/** Handles one event inside the transaction that records it in the inbox (`DB`: the service's `Database`). */
export type EventHandler<S extends Subject, DB> = (
  trx: Transaction<DB>,
  event: EventEnvelope<S, EventData<S>>,
) => Promise<void>;

/** Handles the fresh (never seen) events of a batch, in delivery order, inside the batch's transaction. */
export type BatchEventHandler<S extends Subject, DB> = (
  trx: Transaction<DB>,
  events: Array<EventEnvelope<S, EventData<S>>>,
) => Promise<void>;

interface CommonConsumerOptions<S extends Subject> {
  /** Durable consumer name, unique per (service, purpose); also the inbox key. */
  durable: string;
  subject: S;
  /** Attempts before the message goes to the dead-letter subject. */
  maxAttempts?: number;
  /** Delay before redelivery n is min(baseBackoffMs * 2^(n-1), maxBackoffMs) (the ceiling of ./backoff, no jitter). */
  baseBackoffMs?: number;
  maxBackoffMs?: number;
  /** Transactions in flight at once; effects stay exactly-once through the inbox whatever the order. */
  concurrency?: number;
  /** Called for each event after its transaction committed (for example to kick the outbox relay). */
  afterCommit?: (event: EventEnvelope<S, EventData<S>>) => void;
  /** Where a fresh durable starts: all retained events (default) or only new ones. */
  deliverNewOnly?: boolean;
}

/**
 * One event per transaction (`handler`), or what has arrived, up to `batchSize`, in one (`batchHandler`, a hot
 * path fsyncs once per batch); nothing waits for a batch to fill.
 */
export type ConsumerOptions<S extends Subject, DB> = CommonConsumerOptions<S> &
  (
    | { handler: EventHandler<S, DB>; batchHandler?: never; batchSize?: never }
    | { batchHandler: BatchEventHandler<S, DB>; batchSize: number; handler?: never }
  );

/** A consumer in a list of several subjects'; `defineConsumer` types its handler by its subject. */
export type DeclaredConsumer<DB> = ConsumerOptions<Subject, DB> & { readonly __declared: true };

/** Types a consumer's handler by its subject (`event.data` is that subject's payload) and lists it with others. */
export function defineConsumer<S extends Subject, DB>(options: ConsumerOptions<S, DB>): DeclaredConsumer<DB> {
  // Sound: each consumer is handed only events of its own subject, validated against its schema.
  return options as unknown as DeclaredConsumer<DB>;
}

/** `defineConsumer` for one service's `Database` (`const consumer = consumersOf<CheckoutDatabase>()`). */
export function consumersOf<DB>(): <S extends Subject>(
  options: ConsumerOptions<S, DB>,
) => DeclaredConsumer<DB> {
  return (options) => defineConsumer(options);
}

type Envelope<S extends Subject> = EventEnvelope<S, EventData<S>>;

/**
 * A durable JetStream consumer with an inbox: the event id is recorded in the handler's transaction, so a
 * redelivery does nothing. Failures are retried with bounded backoff, then dead-lettered; a failed batch is
 * retried one event per transaction, so one bad event never holds others back.
 */
export class InboxConsumer<S extends Subject, DB> {
  private messages: ConsumerMessages | undefined;
  private reader: Promise<void> | undefined;
  private workers: Promise<void>[] = [];
  private readonly buffer: JsMsg[] = [];
  private waiters: Array<() => void> = [];
  private stopped = false;
  private readonly batchHandler: BatchEventHandler<S, DB>;
  readonly options: Required<CommonConsumerOptions<S>> & { batchSize: number };

  constructor(
    private readonly bus: Bus,
    private readonly db: Kysely<DB>,
    private readonly logger: Logger,
    options: ConsumerOptions<S, DB>,
  ) {
    const { handler, batchHandler, batchSize, ...common } = options;
    this.batchHandler =
      batchHandler ??
      (async (trx, events) => {
        for (const event of events) await handler!(trx, event);
      });
    this.options = {
      maxAttempts: 8,
      baseBackoffMs: 500,
      maxBackoffMs: 60_000,
      concurrency: 1,
      deliverNewOnly: false,
      afterCommit: () => undefined,
      ...common,
      batchSize: batchSize ?? 1,
    };
  }

  async start(): Promise<void> {
    this.stopped = false;
    const consumer = await this.ensureConsumer();
    const { batchSize, concurrency } = this.options;
    const messages = await consumer.consume({ max_messages: Math.max(64, batchSize * concurrency * 4) });
    this.messages = messages;
    this.reader = (async () => {
      for await (const message of messages) {
        this.buffer.push(message);
        this.wakeAll();
      }
    })().catch((error) =>
      this.logger.error({ err: error, consumer: this.options.durable }, 'consumer reader stopped'),
    );
    this.workers = Array.from({ length: concurrency }, () => this.work());
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.messages?.stop();
    this.wakeAll();
    await this.reader;
    await Promise.allSettled(this.workers);
  }

  private async ensureConsumer(): Promise<Consumer> {
    const { jsm, js, eventsStream } = this.bus;
    const { batchSize, concurrency } = this.options;
    const config = {
      durable_name: this.options.durable,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: this.options.deliverNewOnly ? DeliverPolicy.New : DeliverPolicy.All,
      filter_subject: this.bus.subjectFor(this.options.subject),
      ack_wait: ACK_WAIT_MS * 1_000_000,
      // The server's own bound sits above ours, so our dead-lettering always runs first.
      max_deliver: this.options.maxAttempts + 2,
      max_ack_pending: Math.max(1000, concurrency * 10, batchSize * concurrency * 4),
    };
    const { ConsumerNotFound, ConsumerNameInUse, ConsumerAlreadyExists, ConsumerExists } = JetStreamErrorCode;
    const info = jsm.consumers.info(eventsStream, this.options.durable);
    if (!(await unlessJetStreamError(info, undefined, ConsumerNotFound))) {
      // Another replica may create it between our check and our add.
      const add = jsm.consumers.add(eventsStream, config);
      await unlessJetStreamError(add, undefined, ConsumerNameInUse, ConsumerAlreadyExists, ConsumerExists);
    }
    return js.consumers.get(eventsStream, this.options.durable);
  }

  private async work(): Promise<void> {
    while (!this.stopped) {
      if (this.buffer.length === 0) {
        await new Promise<void>((resolve) => this.waiters.push(resolve));
        continue;
      }
      const batch = this.buffer.splice(0, this.options.batchSize);
      await this.processBatch(batch).catch((error) =>
        this.logger.error(
          { err: error, consumer: this.options.durable },
          'event processing failed unexpectedly',
        ),
      );
    }
  }

  private wakeAll(): void {
    for (const resolve of this.waiters.splice(0)) resolve();
  }

  private async processBatch(batch: JsMsg[]): Promise<void> {
    const valid: Array<[JsMsg, Envelope<S>]> = [];
    for (const message of batch) {
      try {
        valid.push([message, validateEvent(JSON.parse(decoder.decode(message.data))) as Envelope<S>]);
      } catch (error) {
        // A message that can never be valid is not retried: straight to the dead letters.
        await this.deadLetter(message, error as Error);
      }
    }
    if (valid.length === 0) return;
    const startedAt = Date.now();
    try {
      await this.commit(valid);
    } catch (error) {
      if (valid.length === 1) {
        await this.retryLater(valid[0]![0], valid[0]![1], error as Error);
        return;
      }
      this.logger.warn(
        { err: error, consumer: this.options.durable, size: valid.length },
        'batch failed; handling its events one by one',
      );
      for (const [message] of valid) await this.processBatch([message]);
      return;
    }
    if (this.options.batchSize > 1) {
      this.logger.debug(
        { consumer: this.options.durable, size: valid.length, ms: Date.now() - startedAt },
        'batch booked',
      );
    }
    for (const [message, envelope] of valid) {
      message.ack();
      this.options.afterCommit(envelope);
    }
  }

  /** The inbox rows and the handler's effects in one transaction; events seen before are skipped. */
  private async commit(valid: Array<[JsMsg, Envelope<S>]>): Promise<void> {
    const envelopes = valid.map(([, envelope]) => envelope);
    // The span continues the first event's trace (a batch of one: its own).
    const [message, first] = valid[0]!;
    const carrier = {
      traceparent: message.headers?.get('traceparent') || first.trace?.traceparent,
      tracestate: message.headers?.get('tracestate') || first.trace?.tracestate,
    };
    await withSpan(
      `consume ${first.type}`,
      {
        carrier,
        kind: SpanKind.CONSUMER,
        attributes: {
          'messaging.consumer': this.options.durable,
          'messaging.batch.message_count': envelopes.length,
        },
      },
      async () => {
        await this.db.transaction().execute(async (trx) => {
          // Sorted: two transactions with the same redelivered events take their inbox keys in one order.
          const ids = [...new Set(envelopes.map((e) => e.id))].sort();
          const inserted = await sql<{ event_id: string }>`insert into inbox (consumer, event_id)
              select ${this.options.durable}, id from unnest(${ids}::text[]) id order by id
              on conflict do nothing returning event_id`.execute(trx);
          const fresh = new Set(inserted.rows.map((r) => r.event_id));
          // Events seen before (or twice in this batch) are skipped: their effect is already committed.
          const events = envelopes.filter((envelope) => fresh.delete(envelope.id));
          if (events.length > 0) await this.batchHandler(trx, events);
        });
      },
    );
  }

  private async retryLater(message: JsMsg, envelope: Envelope<S>, error: Error): Promise<void> {
    const attempt = message.info.redeliveryCount;
    if (attempt >= this.options.maxAttempts) {
      await this.deadLetter(message, error);
      return;
    }
    const delayMs = backoffCeilingMs(attempt, {
      baseMs: this.options.baseBackoffMs,
      maxMs: this.options.maxBackoffMs,
    });
    this.logger.warn(
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
      await this.bus.js.publish(this.bus.deadLetterSubject(this.options.durable), message.data, {
        headers,
        msgID: `${this.options.durable}:${message.info.streamSequence}`,
      });
      this.logger.error(
        { consumer: this.options.durable, subject: message.subject, err: error },
        'event moved to the dead-letter subject',
      );
      message.term();
    } catch (publishError) {
      this.logger.error({ err: publishError }, 'could not dead-letter an event; will redeliver');
      message.nak(this.options.maxBackoffMs);
    }
  }
}

/** Encodes an envelope as a NATS payload (for tests and tools that publish directly). */
export function encodeEnvelope(envelope: EventEnvelope): Uint8Array {
  return encoder.encode(JSON.stringify(envelope));
}
