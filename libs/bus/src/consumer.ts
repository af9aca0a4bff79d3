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
import type { Bus } from './connection';

const decoder = new TextDecoder();
const encoder = new TextEncoder();

export type EventHandler<S extends Subject> = (
  trx: Transaction<any>,
  event: EventEnvelope<S, EventData<S>>,
) => Promise<void>;

export interface ConsumerOptions<S extends Subject> {
  /** Durable consumer name, unique per (service, purpose); also the inbox key. */
  durable: string;
  subject: S;
  handler: EventHandler<S>;
  /** Attempts before the message goes to the dead-letter subject. */
  maxAttempts?: number;
  /** Delay before redelivery n is min(baseBackoffMs * 2^(n-1), maxBackoffMs). */
  baseBackoffMs?: number;
  maxBackoffMs?: number;
  ackWaitMs?: number;
  /** Messages processed at once; effects stay exactly-once through the inbox whatever the order. */
  concurrency?: number;
  /** Called after the handler's transaction committed (for example to kick the outbox relay). */
  afterCommit?: (event: EventEnvelope<S, EventData<S>>) => void;
  /** Where a fresh durable starts: all retained events (default) or only new ones. */
  deliverNewOnly?: boolean;
}

export function backoffDelayMs(attempt: number, baseMs: number, maxMs: number): number {
  return Math.min(baseMs * 2 ** Math.max(0, attempt - 1), maxMs);
}

/**
 * A durable JetStream consumer with an inbox: the event id is recorded in the same transaction as the
 * handler's effect, so a redelivered event is acknowledged and does nothing. Failures are retried with
 * bounded exponential backoff, then parked on the dead-letter subject for an operator to replay.
 */
export class InboxConsumer<S extends Subject> {
  private messages: ConsumerMessages | undefined;
  private loop: Promise<void> | undefined;
  private readonly inFlight = new Set<Promise<void>>();
  readonly options: Required<Omit<ConsumerOptions<S>, 'afterCommit'>> &
    Pick<ConsumerOptions<S>, 'afterCommit'>;

  constructor(
    private readonly bus: Bus,
    private readonly db: Kysely<any>,
    private readonly logger: Logger,
    options: ConsumerOptions<S>,
  ) {
    this.options = {
      maxAttempts: 8,
      baseBackoffMs: 500,
      maxBackoffMs: 60_000,
      ackWaitMs: 30_000,
      concurrency: 1,
      deliverNewOnly: false,
      ...options,
    };
  }

  async start(): Promise<void> {
    const consumer = await this.ensureConsumer();
    this.messages = await consumer.consume({ max_messages: Math.max(64, this.options.concurrency * 4) });
    this.loop = this.run(this.messages);
  }

  async stop(): Promise<void> {
    this.messages?.stop();
    await this.loop?.catch(() => undefined);
    await Promise.allSettled([...this.inFlight]);
  }

  private async ensureConsumer(): Promise<Consumer> {
    const { jsm, js, eventsStream } = this.bus;
    const config = {
      durable_name: this.options.durable,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: this.options.deliverNewOnly ? DeliverPolicy.New : DeliverPolicy.All,
      filter_subject: this.bus.subjectFor(this.options.subject),
      ack_wait: this.options.ackWaitMs * 1_000_000,
      // The server's own bound sits above ours, so our dead-lettering always runs first.
      max_deliver: this.options.maxAttempts + 2,
      max_ack_pending: Math.max(1000, this.options.concurrency * 10),
    };
    try {
      await jsm.consumers.info(eventsStream, this.options.durable);
    } catch {
      await jsm.consumers.add(eventsStream, config).catch(async (error: Error) => {
        if (!/already in use|exists/.test(error.message)) throw error;
      });
    }
    return js.consumers.get(eventsStream, this.options.durable);
  }

  private async run(messages: ConsumerMessages): Promise<void> {
    for await (const message of messages) {
      const task = this.process(message).finally(() => this.inFlight.delete(task));
      this.inFlight.add(task);
      if (this.inFlight.size >= this.options.concurrency) await Promise.race(this.inFlight);
    }
  }

  private async process(message: JsMsg): Promise<void> {
    let envelope: EventEnvelope<S, EventData<S>>;
    try {
      envelope = validateEvent(JSON.parse(decoder.decode(message.data))) as EventEnvelope<S, EventData<S>>;
    } catch (error) {
      // A message that can never be valid is not retried: straight to the dead letters.
      await this.deadLetter(message, error as Error);
      return;
    }
    const carrier = {
      traceparent: message.headers?.get('traceparent') || envelope.trace?.traceparent,
      tracestate: message.headers?.get('tracestate') || envelope.trace?.tracestate,
    };
    try {
      await withSpan(
        `consume ${envelope.type}`,
        { carrier, kind: SpanKind.CONSUMER, attributes: { 'messaging.consumer': this.options.durable } },
        async () => {
          await this.db.transaction().execute(async (trx) => {
            const inserted =
              await sql`insert into inbox (consumer, event_id) values (${this.options.durable}, ${envelope.id}) on conflict do nothing`.execute(
                trx,
              );
            if (Number(inserted.numAffectedRows ?? 0n) === 0) return; // seen before: the effect is already committed
            await this.options.handler(trx, envelope);
          });
        },
      );
      message.ack();
      this.options.afterCommit?.(envelope);
    } catch (error) {
      const attempt = message.info.redeliveryCount;
      if (attempt >= this.options.maxAttempts) {
        await this.deadLetter(message, error as Error);
        return;
      }
      const delayMs = backoffDelayMs(attempt, this.options.baseBackoffMs, this.options.maxBackoffMs);
      this.logger.warn(
        { err: error, eventId: envelope.id, consumer: this.options.durable, attempt, delayMs },
        'event handler failed; will redeliver',
      );
      message.nak(delayMs);
    }
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
