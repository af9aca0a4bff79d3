import { trace } from '@opentelemetry/api';
import { createEvent, type EventEnvelope } from '@paygate/contracts';
import { currentTraceCarrier, startTelemetry, stopTelemetry, withSpan } from '@paygate/telemetry';
import { countStreamMessages, type TestEnvironment, waitFor } from '@paygate/testing';
import { type Kysely, sql } from 'kysely';
import {
  type Bus,
  encodeEnvelope,
  enqueueEvent,
  InboxConsumer,
  listDeadLetters,
  OutboxRelay,
  replayDeadLetter,
} from '../src';
import { type BusSuite, startBusSuite, transfer } from './helpers';

describe('bus: outbox, inbox, dead letters (real Postgres and JetStream)', () => {
  let suite: BusSuite;
  let env: TestEnvironment;
  let bus: Bus;
  let db: Kysely<any>;

  beforeAll(async () => {
    suite = await startBusSuite('bus');
    ({ env, bus, db } = suite);
  });

  afterAll(() => suite.close());

  it('publishes only committed outbox rows, once, with Nats-Msg-Id = event id', async () => {
    const relay = new OutboxRelay(db, bus, env.logger, { pollIntervalMs: 20 });
    const committed = createEvent('transfer.observed', 'chain-indexer', transfer(1));
    const rolledBack = createEvent('transfer.observed', 'chain-indexer', transfer(2));
    await db.transaction().execute((trx) => enqueueEvent(trx, committed));
    await expect(
      db.transaction().execute(async (trx) => {
        await enqueueEvent(trx, rolledBack);
        throw new Error('abort');
      }),
    ).rejects.toThrow('abort');
    relay.start();
    await waitFor(async () => (await relay.backlog()) === 0);
    // A crash between publish and marking would publish again: JetStream drops the duplicate by msg id.
    await sql`update outbox set published_at = null`.execute(db);
    relay.kick();
    await waitFor(async () => (await relay.backlog()) === 0);
    await relay.stop();
    const inStream = await countStreamMessages(bus, 'transfer.observed');
    expect(inStream.map((e) => e.id)).toEqual([committed.id]);
  });

  it('applies a redelivered event once through the inbox', async () => {
    const seen: string[] = [];
    const consumer = new InboxConsumer(bus, db, env.logger, {
      durable: 'effects-once',
      subject: 'transfer.observed',
      handler: async (trx, event) => {
        seen.push(event.id);
        await trx.insertInto('effects').values({ event_id: event.id, n: 1 }).execute();
      },
    });
    await consumer.start();
    const event = createEvent('transfer.observed', 'chain-indexer', transfer(3));
    // The same event published twice outside the dedupe window looks exactly like a redelivery.
    await bus.js.publish(bus.subjectFor('transfer.observed'), encodeEnvelope(event), {
      msgID: `${event.id}-a`,
    });
    await bus.js.publish(bus.subjectFor('transfer.observed'), encodeEnvelope(event), {
      msgID: `${event.id}-b`,
    });
    await waitFor(async () => {
      const info = await bus.jsm.consumers.info(bus.eventsStream, 'effects-once');
      return info.num_pending === 0 && info.num_ack_pending === 0;
    });
    await consumer.stop();
    const effects = await db.selectFrom('effects').selectAll().where('event_id', '=', event.id).execute();
    expect(effects).toHaveLength(1);
    expect(seen.filter((id) => id === event.id)).toHaveLength(1);
  });

  it('retries with backoff, dead-letters after the bound, and replays on request', async () => {
    let failures = 0;
    let healthy = false;
    const consumer = new InboxConsumer(bus, db, env.logger, {
      durable: 'flaky',
      subject: 'transfer.reorged',
      maxAttempts: 3,
      baseBackoffMs: 20,
      handler: async (trx, event) => {
        if (!healthy) {
          failures++;
          throw new Error('downstream unavailable');
        }
        await trx.insertInto('effects').values({ event_id: event.id, n: 2 }).execute();
      },
    });
    await consumer.start();
    const { observedAt: _o, confirmations: _c, ...base } = transfer(4);
    const event: EventEnvelope = createEvent('transfer.reorged', 'chain-indexer', {
      ...base,
      reorgedAt: new Date().toISOString(),
    });
    await bus.js.publish(bus.subjectFor('transfer.reorged'), encodeEnvelope(event), { msgID: event.id });
    const parked = await waitFor(async () => {
      const letters = await listDeadLetters(bus);
      return letters.find((l) => (l.envelope as EventEnvelope).id === event.id);
    });
    expect(failures).toBe(3);
    expect(parked).toMatchObject({
      consumer: 'flaky',
      error: 'downstream unavailable',
      originalSubject: bus.subjectFor('transfer.reorged'),
    });

    healthy = true;
    await replayDeadLetter(bus, parked.sequence);
    await waitFor(
      async () =>
        (await db.selectFrom('effects').selectAll().where('event_id', '=', event.id).execute()).length === 1,
    );
    expect(await listDeadLetters(bus)).toHaveLength(0);
    await consumer.stop();
  });

  it("stores the enqueuing span's trace with an event that names none, and the consumer continues it", async () => {
    startTelemetry('bus-test');
    let consumedTraceId = '';
    const consumer = new InboxConsumer(bus, db, env.logger, {
      durable: 'traced-default',
      subject: 'transfer.observed',
      deliverNewOnly: true,
      handler: async (_trx, event) => {
        if (event.data.blockNumber === 78)
          consumedTraceId = trace.getActiveSpan()?.spanContext().traceId ?? '';
      },
    });
    await consumer.start();
    let producedTraceId = '';
    const event = createEvent('transfer.observed', 'chain-indexer', transfer(78));
    await withSpan('produce', {}, async (span) => {
      producedTraceId = span.spanContext().traceId;
      await db.transaction().execute((trx) => enqueueEvent(trx, event));
    });
    const stored = await db
      .selectFrom('outbox')
      .select('envelope')
      .where('id', '=', event.id)
      .executeTakeFirstOrThrow();
    expect((stored.envelope as EventEnvelope).trace?.traceparent).toContain(producedTraceId);
    // Published from the relay's own pass (no span of the producer's around it), with the stored context.
    const relay = new OutboxRelay(db, bus, env.logger, { pollIntervalMs: 20 });
    relay.start();
    await waitFor(() => consumedTraceId !== '');
    await relay.stop();
    await consumer.stop();
    expect(consumedTraceId).toBe(producedTraceId);
    await stopTelemetry();
  });

  it('carries the trace context from the producing span through NATS into the consumer', async () => {
    startTelemetry('bus-test');
    let producedTraceId = '';
    let consumedTraceId = '';
    const consumer = new InboxConsumer(bus, db, env.logger, {
      durable: 'traced',
      subject: 'transfer.observed',
      deliverNewOnly: true,
      handler: async (_trx, event) => {
        if (event.data.blockNumber === 77)
          consumedTraceId = trace.getActiveSpan()?.spanContext().traceId ?? '';
      },
    });
    await consumer.start();
    const relay = new OutboxRelay(db, bus, env.logger, { pollIntervalMs: 20 });
    await withSpan('produce', {}, async (span) => {
      producedTraceId = span.spanContext().traceId;
      const event = createEvent('transfer.observed', 'chain-indexer', transfer(77), {
        trace: currentTraceCarrier(),
      });
      await db.transaction().execute((trx) => enqueueEvent(trx, event));
    });
    relay.start();
    await waitFor(() => consumedTraceId !== '');
    await relay.stop();
    await consumer.stop();
    expect(producedTraceId).toMatch(/^[0-9a-f]{32}$/);
    expect(consumedTraceId).toBe(producedTraceId);
    await stopTelemetry();
  });
});
