import { type Bus, serveRpc } from '@paygate/bus';
import { createApp, errorHandler } from '@paygate/http';
import { createTestEnvironment, serveSellersForTests, type TestEnvironment, waitFor } from '@paygate/testing';
import request from 'supertest';
import { SellerAuth, type SellerIdentity } from '../src';

const seller: SellerIdentity = {
  sellerId: 'sel_1',
  walletAddress: `0x${'11'.repeat(20)}`,
  payoutAddress: `0x${'11'.repeat(20)}`,
  publishableKey: 'pk_test_aaaaaaaaaaaaaaaa',
  apiKeyVersion: 1,
};
const key = 'sk_test_0123456789abcdef';

describe('seller auth over NATS request-reply', () => {
  let env: TestEnvironment;
  let bus: Bus;
  beforeAll(async () => {
    env = await createTestEnvironment('auth');
    bus = await env.bus();
  });
  afterAll(() => env.cleanup());

  it('asks the registry once for a burst of calls with one key', async () => {
    const responder = await serveSellersForTests(bus, { [key]: seller });
    let questions = 0;
    const observer = bus.nc.subscribe(bus.rpcSubject('registry.resolve_api_key'), {
      callback: () => {
        questions += 1;
      },
    });
    const auth = new SellerAuth(bus, { cacheTtlMs: 60_000 });
    try {
      const sellers = await Promise.all(Array.from({ length: 16 }, () => auth.resolve(key)));
      expect(sellers.map((found) => found.sellerId)).toEqual(Array(16).fill('sel_1'));
      await bus.nc.flush();
      expect(questions).toBe(1);
    } finally {
      observer.unsubscribe();
      auth.close();
      await responder.stop();
    }
  });

  it('keeps no answer asked for before seller.updated: it may be the revoked key\'s "valid"', async () => {
    // The registry's first answer (the key is valid) is held until the key has been revoked and announced.
    let questions = 0;
    let releaseFirst: (() => void) | undefined;
    const firstHeld = new Promise<void>((resolve) => (releaseFirst = resolve));
    const responder = await serveRpc(
      bus,
      'registry.resolve_api_key',
      async () => {
        questions += 1;
        if (questions === 1) {
          await firstHeld;
          return { ok: true as const, seller };
        }
        return { ok: false as const, reason: 'unknown_key' };
      },
      { warn: () => undefined, error: () => undefined },
    );
    const auth = new SellerAuth(bus, { cacheTtlMs: 60_000 });
    try {
      const beforeRevocation = auth.resolve(key);
      await waitFor(async () => questions === 1);
      bus.nc.publish(
        bus.subjectFor('seller.updated'),
        new TextEncoder().encode(JSON.stringify({ data: { sellerId: 'sel_1' } })),
      );
      await bus.nc.flush(); // the event reached this connection's subscription before the flush's answer
      const afterRevocation = auth.resolve(key).catch((error: { status?: number }) => error.status);
      releaseFirst?.();
      // The request made before the revocation gets the answer it waited for; the one after asks again.
      expect((await beforeRevocation).sellerId).toBe('sel_1');
      expect(await afterRevocation).toBe(401);
      await expect(auth.resolve(key)).rejects.toMatchObject({ status: 401 }); // the "unknown" answer is cached
      expect(questions).toBe(2);
    } finally {
      auth.close();
      await responder.stop();
    }
  });

  it('answers 401 for missing, malformed and unknown keys, and drops the cache on seller.updated', async () => {
    const table: Record<string, SellerIdentity> = { [key]: seller };
    const responder = await serveSellersForTests(bus, table);
    const auth = new SellerAuth(bus, { cacheTtlMs: 60_000 });
    const app = createApp({ logger: env.logger });
    app.get('/me', auth.middleware(), (req, res) => {
      res.json(req.seller);
    });
    app.use(errorHandler(env.logger));

    expect((await request(app).get('/me')).body.error.code).toBe('missing_api_key');
    expect((await request(app).get('/me').set('authorization', 'Bearer nope')).status).toBe(401);
    expect(
      (await request(app).get('/me').set('authorization', 'Bearer sk_unknown_0123456789abcdef')).status,
    ).toBe(401);
    const ok = await request(app).get('/me').set('authorization', `Bearer ${key}`);
    expect(ok.status).toBe(200);
    expect(ok.body.sellerId).toBe('sel_1');

    // Rotation: the registry forgets the key and publishes seller.updated; the cache entry goes at once.
    delete table[key];
    expect((await request(app).get('/me').set('authorization', `Bearer ${key}`)).status).toBe(200); // cached
    bus.nc.publish(
      bus.subjectFor('seller.updated'),
      new TextEncoder().encode(JSON.stringify({ data: { sellerId: 'sel_1' } })),
    );
    await waitFor(
      async () => (await request(app).get('/me').set('authorization', `Bearer ${key}`)).status === 401,
    );

    await responder.stop();
    const unreachable = await request(app)
      .get('/me')
      .set('authorization', 'Bearer sk_other_0123456789abcdef');
    expect(unreachable.status).toBe(503);
    auth.close();
  });
});
