/**
 * The bus through a NATS outage longer than nats.js's old reconnect budget (10 attempts of 2 s): the suite's own
 * nats-server (never the shared one) is killed with SIGKILL for over 25 s and restarted on the same port and
 * store. The service's connection must come back by itself, and the outbox relay must deliver what was committed
 * during the outage, once. And a duplicate ack is checked against the stream: an id the server remembers for a
 * message the stream does not hold is published again, under a new Nats-Msg-Id, with the same event id inside.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createEvent } from '@paygate/contracts';
import { createLogger } from '@paygate/telemetry';
import { findRestartablePort, randomSuffix, waitFor } from '@paygate/testing';
import type { Kysely } from 'kysely';
import {
  ADMIN_USER,
  type AuthorizedNatsServer,
  type Bus,
  connectBus,
  encodeEnvelope,
  enqueueEvent,
  ensureStreams,
  findNatsServerBinary,
  generateNatsPasswords,
  InboxConsumer,
  natsServerList,
  OutboxRelay,
  publishDurably,
  startAuthorizedNatsServer,
} from '../src';
import { type BusSuite, startBusSuite, transfer } from './helpers';

const logger = createLogger('outage-test', 'silent');
const OUTAGE_MS = 26_000;

describe('natsServerList', () => {
  it('reads a comma-separated NATS_URL as every server of the cluster', () => {
    expect(natsServerList('nats://a:4222, nats://b:4223,nats://c:4224')).toEqual([
      'nats://a:4222',
      'nats://b:4223',
      'nats://c:4224',
    ]);
    expect(natsServerList('nats://only:4222')).toEqual(['nats://only:4222']);
    expect(() => natsServerList(' , ')).toThrow('NATS_URL names no server');
  });
});

describe('the bus through a NATS outage of more than 25 s (the suite’s own nats-server)', () => {
  const namespace = `outage${randomSuffix()}`;
  const passwords = generateNatsPasswords();
  const binary = findNatsServerBinary();
  let dir: string;
  let port: number;
  let server: AuthorizedNatsServer;
  let suite: BusSuite;
  let db: Kysely<any>;
  const buses: Bus[] = [];

  const start = () =>
    startAuthorizedNatsServer({ binary: binary!, dir, namespace, passwords, port, startTimeoutMs: 30_000 });
  const connectAs = async (user: 'chain-indexer' | typeof ADMIN_USER, url: string) => {
    const bus = await connectBus({ url, namespace, name: `outage-${user}`, user, password: passwords[user] });
    buses.push(bus);
    return bus;
  };

  beforeAll(async () => {
    if (!binary) throw new Error('nats-server is not installed (apt-get install nats-server)');
    dir = mkdtempSync(path.join(os.tmpdir(), 'paygate-outage-'));
    port = await findRestartablePort();
    server = await start();
    suite = await startBusSuite('outage');
    db = suite.db;
  }, 60_000);

  afterAll(async () => {
    for (const bus of buses) await bus.close().catch(() => undefined);
    await server?.stop();
    await suite?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('reconnects by itself after the server was gone 26 s and delivers what was committed meanwhile, once', async () => {
    const admin = await connectAs(ADMIN_USER, server.url);
    await ensureStreams(admin);
    // The service knows two URLs; the first answers nothing, as a dead cluster node would.
    const deadPort = await findRestartablePort();
    const producer = await connectAs('chain-indexer', `nats://127.0.0.1:${deadPort},${server.url}`);
    const relay = new OutboxRelay(db, producer, logger, { pollIntervalMs: 100, publishTimeoutMs: 2000 });
    const seen: string[] = [];
    const consumer = new InboxConsumer(admin, db, logger, {
      durable: 'outage-effects',
      subject: 'transfer.observed',
      handler: async (_trx, event) => {
        seen.push(event.id);
      },
    });
    await consumer.start();
    relay.start();
    const enqueue = async (n: number) => {
      const event = createEvent('transfer.observed', 'chain-indexer', transfer(n));
      await db.transaction().execute((trx) => enqueueEvent(trx, event));
      relay.kick();
      return event.id;
    };
    try {
      const before = await enqueue(1);
      await waitFor(() => seen.includes(before), { timeoutMs: 20_000, message: 'first event not delivered' });

      server.child.kill('SIGKILL');
      await server.stop();
      const outageStarted = Date.now();
      const duringOutage = await enqueue(2);
      await new Promise((resolve) => setTimeout(resolve, OUTAGE_MS));
      expect(producer.nc.isClosed()).toBe(false);
      server = await start();
      const restartedAfterMs = Date.now() - outageStarted;
      expect(restartedAfterMs).toBeGreaterThan(25_000);

      await waitFor(() => seen.includes(duringOutage), {
        timeoutMs: 60_000,
        intervalMs: 250,
        message: 'the event committed during the outage never arrived',
      });
      const after = await enqueue(3);
      await waitFor(() => seen.includes(after), {
        timeoutMs: 30_000,
        message: 'no delivery after the outage',
      });
      expect(producer.nc.isClosed()).toBe(false);
      expect(admin.nc.isClosed()).toBe(false);
      expect(seen).toEqual([before, duringOutage, after]);
      const stream = await admin.jsm.streams.info(admin.eventsStream);
      expect(stream.state.messages).toBe(3);
    } finally {
      await relay.stop();
      await consumer.stop();
    }
  }, 150_000);

  it('checks a duplicate ack against the stream and publishes again when the stream does not hold it', async () => {
    const admin = await connectAs(ADMIN_USER, server.url);
    const producer = await connectAs('chain-indexer', server.url);
    const event = createEvent('transfer.observed', 'chain-indexer', transfer(40));
    const subject = producer.subjectFor('transfer.observed');
    const first = await publishDurably(producer, subject, encodeEnvelope(event), { msgID: event.id });
    expect(first.confirmedDuplicate).toBe(false);

    // A real duplicate: the stream holds the first publish, so the retry is confirmed and nothing is added.
    const again = await publishDurably(producer, subject, encodeEnvelope(event), { msgID: event.id });
    expect(again).toEqual({ seq: first.seq, msgID: event.id, confirmedDuplicate: true });

    // The server still remembers the id, but the message is gone (as a write lost in a leader election).
    await admin.jsm.streams.deleteMessage(admin.eventsStream, first.seq, false);
    const republished = await publishDurably(producer, subject, encodeEnvelope(event), {
      msgID: event.id,
      retryForMs: 10_000,
    });
    expect(republished.confirmedDuplicate).toBe(false);
    expect(republished.msgID).not.toBe(event.id);
    expect(republished.msgID.startsWith(`${event.id}~`)).toBe(true);
    const stored = await admin.jsm.streams.getMessage(admin.eventsStream, { seq: republished.seq });
    expect(JSON.parse(new TextDecoder().decode(stored.data)).id).toBe(event.id);
  }, 60_000);
});
