import type { Bus, RpcServer } from '@paygate/bus';
import {
  createTestEnvironment,
  openSchema,
  serveSellersForTests,
  TestClock,
  type TestEnvironment,
  waitFor,
} from '@paygate/testing';
import type { Kysely } from 'kysely';
import { loadConfig, type RunningNotifier, startNotifier } from '../src';
import type { NotifierDatabase } from '../src/db';
import {
  paymentConfirmed,
  publish,
  SilentServer,
  sellerIdentity,
  sellerUpdated,
  serveWebhookSecrets,
  WebhookReceiver,
} from './helpers';

jest.setTimeout(120_000);

const HOSTILE = 'seller_hostile';
const HONEST = 'seller_honest';
const HOSTILE_SESSION = 'sessionHH.hostileAA.signature0123456789';
const HONEST_KEY = 'sk_test_honest_seller_0123456789';
const HOSTILE_KEY = 'sk_test_hostile_seller_0123456789';
const secrets = {
  [HOSTILE]: { secret: 'whsec_hostile_0123456789', version: 1 },
  [HONEST]: { secret: 'whsec_honest_0123456789', version: 1 },
};
const identities = {
  [HOSTILE_SESSION]: sellerIdentity(HOSTILE),
  [HOSTILE_KEY]: sellerIdentity(HOSTILE),
  [HONEST_KEY]: sellerIdentity(HONEST),
};

/**
 * One seller points its account URL and its 16 endpoints at a server that accepts and never answers, and queues
 * hundreds of deliveries: each attempt costs a whole timeout. Another seller's webhook must still go out at once.
 */
describe('notifier: one seller with endpoints that never answer does not delay another seller', () => {
  /** Each attempt at the hostile server lasts this long (the bound below is a fraction of it). */
  const TIMEOUT_MS = 3000;
  const SELLER_MAX_IN_FLIGHT = 4;
  let env: TestEnvironment;
  let bus: Bus;
  let notifier: RunningNotifier;
  let db: Kysely<NotifierDatabase>;
  const silent = new SilentServer();
  const honest = new WebhookReceiver();
  const servers: RpcServer[] = [];

  beforeAll(async () => {
    env = await createTestEnvironment('notiffair');
    bus = await env.bus();
    await silent.start();
    await honest.start();
    servers.push(await serveWebhookSecrets(bus, secrets), await serveSellersForTests(bus, identities));
    notifier = await startNotifier(
      loadConfig(
        env.envFor('notifier', {
          WEBHOOK_POLL_INTERVAL_MS: '50',
          WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
          WEBHOOK_CLAIM_LEASE_MS: String(3 * TIMEOUT_MS),
          WEBHOOK_SELLER_MAX_IN_FLIGHT: String(SELLER_MAX_IN_FLIGHT),
          WEBHOOK_ENDPOINT_MAX_IN_FLIGHT: '2',
        }),
      ),
    );
    db = openSchema<NotifierDatabase>(env.schemaFor('notifier'));
    await publish(
      bus,
      'seller.updated',
      'registry',
      sellerUpdated({ sellerId: HOSTILE, webhookUrl: `${silent.url}/account` }),
    );
    await publish(
      bus,
      'seller.updated',
      'registry',
      sellerUpdated({ sellerId: HONEST, webhookUrl: honest.url }),
    );
    await waitFor(async () => (await db.selectFrom('sellers').selectAll().execute()).length === 2, {
      message: 'both sellers projected',
    });
  });

  afterAll(async () => {
    await notifier?.stop();
    await db?.destroy();
    await silent.stop();
    await honest.stop();
    for (const server of servers) await server.stop();
    await env?.cleanup();
  });

  it("delivers the honest seller's webhook within a fraction of one timeout, and keeps every hostile delivery", async () => {
    for (let i = 0; i < 16; i++) {
      const response = await fetch(`${notifier.url}/api/v1/webhooks/endpoints`, {
        method: 'POST',
        headers: { authorization: `Bearer ${HOSTILE_SESSION}`, 'content-type': 'application/json' },
        body: JSON.stringify({ url: `${silent.url}/hook-${i}`, events: ['*'] }),
      });
      expect(response.status).toBe(201);
    }
    for (let i = 0; i < 20; i++)
      await publish(bus, 'payment.confirmed', 'escrow-ledger', paymentConfirmed(HOSTILE));
    const hostileDeliveries = () =>
      db.selectFrom('webhook_deliveries').selectAll().where('seller_id', '=', HOSTILE).execute();
    await waitFor(async () => (await hostileDeliveries()).length === 340, {
      timeoutMs: 30_000,
      message: async () => `340 hostile deliveries queued (have ${(await hostileDeliveries()).length})`,
    });
    // The dispatcher is busy with them: the positive signal before the honest seller's event.
    await waitFor(() => silent.connectedAt.length > 0, { message: 'hostile deliveries in flight' });

    const publishedAt = Date.now();
    await publish(bus, 'payment.confirmed', 'escrow-ledger', paymentConfirmed(HONEST));
    const received = await waitFor(() => honest.received[0], {
      timeoutMs: 6 * TIMEOUT_MS,
      message: () =>
        Promise.resolve(
          `honest webhook received (hostile connections so far: ${silent.connectedAt.length}, timeout ${TIMEOUT_MS} ms)`,
        ),
    });
    const latencyMs = received.receivedAt - publishedAt;
    // Before: behind ~340 hostile attempts, 20 a pass, 8 at a time, each TIMEOUT_MS (about 17 passes x 3 timeouts).
    expect(latencyMs).toBeLessThan(TIMEOUT_MS);

    // What one seller holds at once: every attempt at the silent server lasts TIMEOUT_MS, so the connections it
    // opened within the first 0.9 timeout were all open together.
    const first = silent.connectedAt[0]!;
    const together = silent.connectedAt.filter((at) => at - first < 0.9 * TIMEOUT_MS).length;
    expect(together).toBeLessThanOrEqual(SELLER_MAX_IN_FLIGHT);

    // Nothing of the hostile seller's is dropped: each delivery is still pending (retried or held), none failed.
    const statuses = new Set((await hostileDeliveries()).map((d) => d.status));
    expect([...statuses]).toEqual(['pending']);
  });
});

/** An endpoint that keeps failing is opened: its deliveries are held (not dropped), then probed once, then resumed. */
describe('notifier: circuit breaker per webhook target', () => {
  const SELLER = 'seller_breaker';
  const OTHER = 'seller_bystander';
  const KEY = 'sk_test_breaker_seller_0123456789';
  const THRESHOLD = 3;
  const COOLDOWN_MS = 60_000;
  const TIMEOUT_MS = 1500;
  let env: TestEnvironment;
  let bus: Bus;
  let notifier: RunningNotifier;
  let db: Kysely<NotifierDatabase>;
  const clock = new TestClock('2026-12-01T12:00:00.000Z');
  const receiver = new WebhookReceiver();
  const bystander = new WebhookReceiver();
  const servers: RpcServer[] = [];
  const api = async (path: string) => {
    const response = await fetch(`${notifier.url}${path}`, { headers: { authorization: `Bearer ${KEY}` } });
    return response.json();
  };
  const metric = async (line: RegExp) => {
    const text = await (await fetch(`${notifier.url}/metrics`)).text();
    const found = text.split('\n').find((l) => line.test(l));
    return found === undefined ? undefined : Number(found.split(' ').at(-1));
  };
  const deliveries = () =>
    db
      .selectFrom('webhook_deliveries')
      .selectAll()
      .where('seller_id', '=', SELLER)
      .orderBy('created_at')
      .orderBy('delivery_id')
      .execute();
  const attempts = async () =>
    (await deliveries()).reduce((sum, delivery) => sum + delivery.attempt_count, 0);

  beforeAll(async () => {
    env = await createTestEnvironment('notifbreaker');
    bus = await env.bus();
    await receiver.start();
    await bystander.start();
    servers.push(
      await serveWebhookSecrets(bus, {
        [SELLER]: { secret: 'whsec_breaker_0123456789', version: 1 },
        [OTHER]: { secret: 'whsec_bystander_0123456789', version: 1 },
      }),
      await serveSellersForTests(bus, { [KEY]: sellerIdentity(SELLER) }),
    );
    notifier = await startNotifier(
      {
        ...loadConfig(
          env.envFor('notifier', {
            WEBHOOK_POLL_INTERVAL_MS: '50',
            WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
            WEBHOOK_CLAIM_LEASE_MS: String(3 * TIMEOUT_MS),
            WEBHOOK_BREAKER_FAILURE_THRESHOLD: String(THRESHOLD),
            WEBHOOK_BREAKER_COOLDOWN_MS: String(COOLDOWN_MS),
            WEBHOOK_BREAKER_MAX_COOLDOWN_MS: String(10 * COOLDOWN_MS),
          }),
        ),
        now: clock.now,
      },
      { random: () => 1 },
    );
    db = openSchema<NotifierDatabase>(env.schemaFor('notifier'));
    await publish(
      bus,
      'seller.updated',
      'registry',
      sellerUpdated({ sellerId: SELLER, webhookUrl: receiver.url }),
    );
    await publish(
      bus,
      'seller.updated',
      'registry',
      sellerUpdated({ sellerId: OTHER, webhookUrl: bystander.url }),
    );
    await waitFor(async () => (await db.selectFrom('sellers').selectAll().execute()).length === 2, {
      message: 'sellers projected',
    });
  });

  afterAll(async () => {
    await notifier?.stop();
    await db?.destroy();
    await receiver.stop();
    await bystander.stop();
    for (const server of servers) await server.stop();
    await env?.cleanup();
  });

  it('opens after N consecutive failures, holds the deliveries, probes once, reopens longer, closes on a success', async () => {
    receiver.respond = () => 503;
    for (let i = 0; i < THRESHOLD; i++)
      await publish(bus, 'payment.confirmed', 'escrow-ledger', paymentConfirmed(SELLER));
    await waitFor(async () => (await attempts()) === THRESHOLD, { message: `${THRESHOLD} failed attempts` });

    // Open: the seller sees it on every delivery to that URL, with when it is tried again.
    const openedAt = clock.nowMs();
    const listed = await waitFor(
      async () => {
        const page = await api('/api/v1/webhooks/deliveries');
        return page.data?.[0]?.circuit?.state === 'open' ? page.data : undefined;
      },
      { message: 'circuit open in the listing' },
    );
    expect(listed).toHaveLength(THRESHOLD);
    expect(listed[0].circuit).toMatchObject({
      state: 'open',
      consecutiveFailures: THRESHOLD,
      retryAt: new Date(openedAt + COOLDOWN_MS).toISOString(),
    });
    expect(listed[0].circuit.lastError).toBe('HTTP 503');
    expect(await metric(/^notifier_webhook_circuits_open\{/)).toBe(1);
    expect(await metric(/^notifier_webhook_circuit_transitions_total\{.*to="open"/)).toBe(1);

    // A new event to the open URL is held: not attempted, not failed. (Positive signal: the bystander seller's
    // webhook, created after it, was claimed and delivered by a later pass.)
    const held = await publish(bus, 'payment.confirmed', 'escrow-ledger', paymentConfirmed(SELLER));
    await waitFor(async () => (await deliveries()).length === THRESHOLD + 1, {
      message: 'held delivery queued',
    });
    await publish(bus, 'payment.confirmed', 'escrow-ledger', paymentConfirmed(OTHER));
    await waitFor(() => bystander.received.length === 1, { message: 'bystander delivered' });
    const heldRow = (await deliveries()).find((d) => d.event_id === held)!;
    expect(heldRow).toMatchObject({ status: 'pending', attempt_count: 0 });
    expect(receiver.received).toHaveLength(THRESHOLD);

    // The cooldown passes: one probe goes out (it hangs: a timeout), nothing else while it is out, and the
    // circuit opens again for twice as long.
    const answers: Array<number | 'hang'> = ['hang'];
    receiver.respond = () => answers.shift() ?? 200;
    clock.set(openedAt + COOLDOWN_MS);
    await waitFor(() => receiver.received.length === THRESHOLD + 1, { message: 'probe sent' });
    await waitFor(async () => (await attempts()) === THRESHOLD + 1, {
      timeoutMs: 5 * TIMEOUT_MS,
      message: 'probe timed out',
    });
    const reopened = (await api('/api/v1/webhooks/deliveries')).data[0].circuit;
    expect(reopened).toMatchObject({
      state: 'open',
      consecutiveFailures: THRESHOLD + 1,
      retryAt: new Date(clock.nowMs() + 2 * COOLDOWN_MS).toISOString(),
    });
    expect(reopened.lastError).toMatch(/timeout/);
    expect(receiver.received).toHaveLength(THRESHOLD + 1);
    expect(await metric(/^notifier_webhook_circuit_transitions_total\{.*to="half_open"/)).toBe(1);

    // It answers again: the probe succeeds, the circuit closes, and every held delivery goes out.
    clock.advance(2 * COOLDOWN_MS);
    await waitFor(async () => (await deliveries()).every((d) => d.status === 'delivered'), {
      message: 'every delivery delivered after the circuit closed',
    });
    const closed = (await api('/api/v1/webhooks/deliveries')).data[0].circuit;
    expect(closed).toMatchObject({ state: 'closed', consecutiveFailures: 0, retryAt: null });
    expect(await metric(/^notifier_webhook_circuits_open\{/)).toBe(0);
    expect(await metric(/^notifier_webhook_circuit_transitions_total\{.*to="closed"/)).toBe(1);
    expect((await deliveries()).map((d) => d.status)).toEqual(Array(THRESHOLD + 1).fill('delivered'));
  });
});

describe('notifier: fairness settings', () => {
  const base = { DATABASE_URL: 'postgres://x@127.0.0.1:5432/x', NATS_URL: 'nats://127.0.0.1:4222' };
  it('refuses values that do not nest, naming each', () => {
    expect(() =>
      loadConfig({
        ...base,
        WEBHOOK_CONCURRENCY: '8',
        WEBHOOK_SELLER_MAX_IN_FLIGHT: '8',
        WEBHOOK_ENDPOINT_MAX_IN_FLIGHT: '9',
        WEBHOOK_BREAKER_COOLDOWN_MS: '60000',
        WEBHOOK_BREAKER_MAX_COOLDOWN_MS: '1000',
      }),
    ).toThrow(
      /WEBHOOK_SELLER_MAX_IN_FLIGHT must be below WEBHOOK_CONCURRENCY; WEBHOOK_ENDPOINT_MAX_IN_FLIGHT must not exceed WEBHOOK_SELLER_MAX_IN_FLIGHT; WEBHOOK_BREAKER_MAX_COOLDOWN_MS must not be below WEBHOOK_BREAKER_COOLDOWN_MS/,
    );
    expect(() => loadConfig({ ...base, WEBHOOK_SELLER_SHARE: '0' })).toThrow(/WEBHOOK_SELLER_SHARE/);
    expect(() => loadConfig({ ...base, WEBHOOK_BREAKER_FAILURE_THRESHOLD: 'many' })).toThrow(
      /WEBHOOK_BREAKER_FAILURE_THRESHOLD/,
    );
    expect(loadConfig(base)).toMatchObject({
      webhookSellerShare: 4,
      webhookEndpointShare: 2,
      webhookSellerMaxInFlight: 8,
      webhookEndpointMaxInFlight: 4,
      webhookBreakerFailureThreshold: 5,
    });
  });
});
