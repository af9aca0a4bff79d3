import { createEvent } from '@paygate/contracts';
import { countStreamMessages, type TestEnvironment, waitFor } from '@paygate/testing';
import { type Kysely, sql } from 'kysely';
import type { SubscriptionOptions } from 'nats';
import {
  type Bus,
  enqueueEvent,
  ensureStreams,
  InboxConsumer,
  isJetStreamError,
  isTransientJetStreamError,
  JetStreamErrorCode,
  jetStreamErrorCode,
  listDeadLetters,
  OutboxRelay,
} from '../src';
import { type BusSuite, startBusSuite, transfer } from './helpers';

describe('bus plumbing: batch consumer, NATS error codes, inbox pruning, ordered relay', () => {
  let suite: BusSuite;
  let env: TestEnvironment;
  let bus: Bus;
  let db: Kysely<any>;

  beforeAll(async () => {
    suite = await startBusSuite('busplumb');
    ({ env, bus, db } = suite);
  });

  afterAll(() => suite.close());

  it('books a batch in one transaction, once per event; a failing batch is retried event by event', async () => {
    const events = Array.from({ length: 40 }, (_, i) =>
      createEvent('transfer.observed', 'chain-indexer', transfer(100 + i)),
    );
    const poison = events[17]!.id;
    let batches = 0;
    const consumer = new InboxConsumer(bus, db, env.logger, {
      durable: 'batched',
      subject: 'transfer.observed',
      batchSize: 16,
      concurrency: 2,
      maxAttempts: 1,
      baseBackoffMs: 10,
      batchHandler: async (trx, batch) => {
        const n = ++batches;
        if (batch.some((event) => event.id === poison)) throw new Error('poison event');
        for (const event of batch)
          await trx.insertInto('effects').values({ event_id: event.id, n }).execute();
      },
    });
    // Published before the consumer starts, so batches fill; each event twice (a redelivery look-alike).
    for (const event of [...events, ...events]) {
      await bus.js.publish(
        bus.subjectFor('transfer.observed'),
        new TextEncoder().encode(JSON.stringify(event)),
        {
          msgID: `${event.id}-${Math.random()}`,
        },
      );
    }
    await consumer.start();
    const parked = await waitFor(async () =>
      (await listDeadLetters(bus)).find((letter) => letter.consumer === 'batched'),
    );
    expect((parked.envelope as { id: string }).id).toBe(poison);
    await waitFor(async () => {
      const info = await bus.jsm.consumers.info(bus.eventsStream, 'batched');
      return info.num_pending === 0 && info.num_ack_pending === 0;
    });
    await consumer.stop();
    const effects = await db.selectFrom('effects').select(['event_id', 'n']).execute();
    // Every event but the poison one, exactly once, and some of them booked several to a transaction.
    expect(effects.map((e) => e.event_id).sort()).toEqual(
      events
        .map((e) => e.id)
        .filter((id) => id !== poison)
        .sort(),
    );
    const perBatch = new Map<number, number>();
    for (const effect of effects) perBatch.set(effect.n, (perBatch.get(effect.n) ?? 0) + 1);
    expect(Math.max(...perBatch.values())).toBeGreaterThan(1);
  });

  it('matches NATS errors by their JetStream API code: replicas racing to declare streams and consumers', async () => {
    const missing = await bus.jsm.streams.info('NO_SUCH_STREAM_PLUMBING').catch((error) => error);
    expect(jetStreamErrorCode(missing)).toBe(JetStreamErrorCode.StreamNotFound);
    expect(isJetStreamError(missing, JetStreamErrorCode.ConsumerNotFound)).toBe(false);
    const noConsumer = await bus.jsm.consumers.info(bus.eventsStream, 'nobody').catch((error) => error);
    expect(jetStreamErrorCode(noConsumer)).toBe(JetStreamErrorCode.ConsumerNotFound);

    // Fresh streams declared by three replicas at once, then again: no replica fails.
    const fresh = await env.bus();
    await Promise.all([
      fresh.jsm.streams.delete(fresh.eventsStream),
      fresh.jsm.streams.delete(fresh.deadLetterStream),
    ]);
    await Promise.all([ensureStreams(fresh), ensureStreams(fresh), ensureStreams(fresh)]);
    await ensureStreams(fresh);
    expect((await fresh.jsm.streams.info(fresh.eventsStream)).config.subjects).toEqual([
      `${fresh.namespace}.*.*`,
    ]);

    // Two replicas of one consumer starting together share the durable.
    const replicas = [1, 2].map(
      () =>
        new InboxConsumer(fresh, db, env.logger, {
          durable: 'raced',
          subject: 'transfer.reorged',
          handler: async () => undefined,
        }),
    );
    await Promise.all(replicas.map((replica) => replica.start()));
    await Promise.all(replicas.map((replica) => replica.stop()));
    expect((await fresh.jsm.consumers.info(fresh.eventsStream, 'raced')).name).toBe('raced');

    // Any other error is not taken for "not found": a consumer on a stream that is gone fails loudly.
    await fresh.jsm.streams.delete(fresh.eventsStream);
    const orphan = new InboxConsumer(fresh, db, env.logger, {
      durable: 'orphan',
      subject: 'transfer.reorged',
      handler: async () => undefined,
    });
    const failure = await orphan.start().catch((error) => error);
    expect(jetStreamErrorCode(failure)).toBe(JetStreamErrorCode.StreamNotFound);
    await ensureStreams(fresh);
  });

  it('tells a JetStream request that got no answer (worth retrying at start-up) from a refusal', async () => {
    // Subjects outside the events stream (it would answer a publish into `<namespace>.*.*` itself).
    // No responder: nats.js answers at once with code 503.
    const noResponder = await bus.nc
      .request(`probe.${bus.namespace}.nobody.listens`, new Uint8Array(), { timeout: 2000 })
      .catch((error) => error);
    expect(isTransientJetStreamError(noResponder)).toBe(true);
    // A responder that never answers: TIMEOUT.
    const silent = bus.nc.subscribe(`probe.${bus.namespace}.silent.api`);
    const timedOut = await bus.nc
      .request(`probe.${bus.namespace}.silent.api`, new Uint8Array(), { timeout: 50 })
      .catch((error) => error);
    silent.unsubscribe();
    expect(isTransientJetStreamError(timedOut)).toBe(true);
    // The server's refusal is final: a consumer on a stream that does not exist.
    const refused = await bus.jsm.consumers.info('NO_SUCH_STREAM_PLUMBING', 'nobody').catch((error) => error);
    expect(jetStreamErrorCode(refused)).toBe(JetStreamErrorCode.StreamNotFound);
    expect(isTransientJetStreamError(refused)).toBe(false);
  });

  it('prunes the inbox like the outbox: rows past retention, oldest first, in bounded batches', async () => {
    await sql`insert into inbox (consumer, event_id, processed_at)
        select 'old', 'evt_old_' || i, now() - make_interval(days => 40) - make_interval(secs => i)
        from generate_series(1, 2500) i`.execute(db);
    await sql`insert into inbox (consumer, event_id, processed_at)
        select 'recent', 'evt_recent_' || i, now() - make_interval(days => 20) from generate_series(1, 10) i`.execute(
      db,
    );
    await sql`insert into outbox (id, subject, envelope, published_at)
        select 'evt_published_' || i, 'transfer.observed', '{}', now() - make_interval(hours => 30)
        from generate_series(1, 1200) i`.execute(db);
    await sql`insert into outbox (id, subject, envelope, published_at)
        values ('evt_unpublished_old', 'transfer.observed', '{}', null)`.execute(db);
    const relay = new OutboxRelay(db, bus, env.logger, { pruneBatchSize: 1000, pruneMaxBatches: 2 });
    // Each pass is bounded: 2 statements of 1000 rows; the rest goes at the next pass.
    expect(await relay.prune()).toEqual({ outbox: 1200, inbox: 2000 });
    expect(await relay.prune()).toEqual({ outbox: 0, inbox: 500 });
    const left = await sql<{ consumer: string; n: number }>`select consumer, count(*)::int n from inbox
        where consumer in ('old', 'recent') group by consumer`.execute(db);
    expect(left.rows).toEqual([{ consumer: 'recent', n: 10 }]);
    // Never an unpublished row, however old.
    const kept = await sql`select id from outbox where id = 'evt_unpublished_old'`.execute(db);
    expect(kept.rows).toHaveLength(1);
    await sql`delete from outbox where id = 'evt_unpublished_old'`.execute(db);
  });

  it('publishes one at a time with publishInFlight 1: a row behind a failed one waits and is published after it', async () => {
    const [a, b, c] = [1, 2, 3].map((n) =>
      createEvent('transfer.observed', 'chain-indexer', transfer(900 + n)),
    );
    await db.transaction().execute(async (trx) => {
      for (const event of [a!, b!, c!]) await enqueueEvent(trx, event);
    });
    // b cannot be published for now (its subject is outside every stream), so c must not overtake it.
    await sql`update outbox set subject = 'nowhere' where id = ${b!.id}`.execute(db);
    // A failed publish gives up after half a second (not the default 30 s of retries): the test needs only the failure.
    const relay = new OutboxRelay(db, bus, env.logger, {
      publishTimeoutMs: 1000,
      publishRetryMs: 500,
      publishInFlight: 1,
    });
    expect(await relay.publishBatch()).toBe(1);
    const waiting = await sql<{ id: string; attempts: number }>`select id, attempts from outbox
        where published_at is null order by id`.execute(db);
    expect(waiting.rows).toEqual([
      { id: b!.id, attempts: 1 },
      { id: c!.id, attempts: 0 },
    ]);
    await sql`update outbox set subject = 'transfer.observed' where id = ${b!.id}`.execute(db);
    expect(await relay.publishBatch()).toBe(2);
    const published = (await countStreamMessages(bus, 'transfer.observed')).map((e) => e.id);
    expect(published.filter((id) => [a!.id, b!.id, c!.id].includes(id))).toEqual([a!.id, b!.id, c!.id]);
  });
  it('publishes a pass with many publishes awaiting their acks at once, in outbox order, with their trace context', async () => {
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const events = Array.from({ length: 300 }, (_, i) =>
      createEvent('transfer.observed', 'chain-indexer', transfer(2000 + i), { trace: { traceparent } }),
    );
    await db.transaction().execute(async (trx) => {
      for (const event of events) await enqueueEvent(trx, event);
    });
    // The real connection, counted: how many publishes of the pass wait for their acks at the same time (a
    // publish with a reply subject is sent; its ack arrives on the reply subscription).
    let inFlight = 0;
    let mostInFlight = 0;
    const nc = Object.assign(Object.create(bus.nc), {
      publish: (...args: Parameters<Bus['nc']['publish']>) => {
        if (args[2]?.reply) mostInFlight = Math.max(mostInFlight, ++inFlight);
        return bus.nc.publish(...args);
      },
      subscribe: (subject: string, options: SubscriptionOptions) =>
        bus.nc.subscribe(subject, {
          ...options,
          callback: (error, message) => {
            inFlight -= 1;
            options.callback?.(error, message);
          },
        }),
    }) as Bus['nc'];
    const counted = { ...bus, nc } as Bus;
    const relay = new OutboxRelay(db, counted, env.logger, { batchSize: 300 });
    expect(await relay.publishBatch()).toBe(300);
    expect(mostInFlight).toBeGreaterThan(1);
    expect(mostInFlight).toBeLessThanOrEqual(relay.options.publishInFlight);
    const ids = new Set(events.map((e) => e.id));
    const stored = (await countStreamMessages(bus, 'transfer.observed')).filter((e) => ids.has(e.id));
    expect(stored.map((e) => e.id)).toEqual([...events].map((e) => e.id).sort());
    expect(stored[0]).toEqual(JSON.parse(JSON.stringify(events.find((e) => e.id === stored[0]!.id))));
    const waiting = await sql<{ n: number }>`select count(*)::int n from outbox
        where published_at is null and id = any(${[...ids]}::text[])`.execute(db);
    expect(waiting.rows[0]!.n).toBe(0);
  });
});
