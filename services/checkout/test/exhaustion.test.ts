import { randomBytes } from 'node:crypto';
import { parseUsdc } from '@paygate/money';
import { testWallets, waitFor } from '@paygate/testing';
import { sql } from 'kysely';
import request from 'supertest';
import { loadConfig } from '../src';
import { SessionStore } from '../src/sessions/sessions';
import {
  type CheckoutHarness,
  ESCROW,
  publishSkill,
  skillEvent,
  startHarness,
  transferEvent,
  USDC,
} from './helpers';

/**
 * A price's unique amounts are shared by every seller (matching is by amount on one checkout wallet, so uniqueness
 * must be global), and each is held until expiry + the late window. What stops one party from taking them all: a
 * seller's unpaid sessions may hold at most MAX_AMOUNT_SHARE_PERCENT of a price's amounts, a seller has a cap on
 * open sessions, creation is rate limited per key and per client address (429 with Retry-After), and accounts per
 * client per hour at the registry. And a price whose amounts are all held (sybil accounts together can fill one)
 * refuses no buyer: the session gets its own deposit address. Small figures here so the limits are reached
 * quickly: 40 amounts a price, 25 % per seller, so four sybils fill it.
 */

const SUFFIX_SETTINGS = {
  AMOUNT_SUFFIX_RANGE_MICRO: '41',
  MAX_AMOUNT_SHARE_PERCENT: '25',
};
const MAX_OPEN = 15;
const PER_KEY = 20;
const PER_CLIENT = 30;

interface ExtraSeller {
  sellerId: string;
  publishableKey: string;
}

describe('no seller can exhaust a price for another seller; creation is bounded', () => {
  let h: CheckoutHarness;
  const other: ExtraSeller = {
    sellerId: `sel_other_${randomBytes(3).toString('hex')}`,
    publishableKey: `pk_test_${randomBytes(12).toString('hex')}`,
  };

  /** A seller known to checkout by its publishable key (a free account, as a sybil would make), with a skill. */
  const addSeller = async (seller: ExtraSeller, skill: string, price: string) => {
    await h.publish('seller.updated', {
      sellerId: seller.sellerId,
      revision: 1,
      walletAddress: testWallets.platform.address,
      payoutAddress: testWallets.platform.address,
      publishableKey: seller.publishableKey,
      apiKeyVersion: 1,
      webhookUrl: null,
      webhookSecretVersion: 0,
      settlementFrequency: 'DAILY',
      minimumSettlement: '10',
      updatedAt: new Date().toISOString(),
    });
    await waitFor(
      () =>
        h.service.ctx.db
          .selectFrom('sellers')
          .select('seller_id')
          .where('seller_id', '=', seller.sellerId)
          .executeTakeFirst(),
      { message: `seller ${seller.sellerId} projected` },
    );
    await publishSkill(
      h,
      skillEvent(h, { name: skill, skillId: `sk_${skill}`, sellerId: seller.sellerId }, [price]),
    );
  };

  beforeAll(async () => {
    h = await startHarness('coexhaust', {
      ...SUFFIX_SETTINGS,
      MAX_OPEN_SESSIONS_PER_SELLER: String(MAX_OPEN),
      SESSION_RATE_LIMIT_PER_KEY: String(PER_KEY),
      SESSION_RATE_LIMIT_PER_CLIENT: String(PER_CLIENT),
    });
    // A second, honest seller (a widget on its shop), selling a product at the same price as the flood.
    await addSeller(other, 'shop-item', '4.2');
  });
  afterAll(() => h.stop());

  /** A new one-minute window for the rate limits (the limiter runs on the service's clock). */
  const nextMinute = () => h.clock.advanceSeconds(61);
  const secretSession = (key: string, amount: string) =>
    request(h.url)
      .post('/api/v1/checkout/sessions')
      .set('Authorization', `Bearer ${key}`)
      .send({ amount, description: 'flood' });
  const widgetSession = (key: string, skill: string, client?: string) => {
    const req = request(h.url).post('/api/v1/checkout/sessions').set('Authorization', `Bearer ${key}`);
    if (client) req.set('X-Forwarded-For', client);
    return req.send({ skill });
  };
  const expectRetryLater = (res: request.Response, code: string, maxSeconds: number) => {
    expect({ status: res.status, code: res.body.error?.code }).toEqual({ status: 429, code });
    const retryAfter = Number(res.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(maxSeconds);
    expect(res.body.error.retryAfterSeconds).toBe(retryAfter);
  };

  it('sybil sellers filling a price refuse no buyer: the next session gets its own address, and each transfer pays its own session', async () => {
    nextMinute();
    // Four free sybil accounts, each opening sessions of the honest seller's price from its own widget key.
    const sybils: ExtraSeller[] = Array.from({ length: 4 }, (_, i) => ({
      sellerId: `sel_sybil${i}_${randomBytes(3).toString('hex')}`,
      publishableKey: `pk_test_${randomBytes(12).toString('hex')}`,
    }));
    for (const [i, sybil] of sybils.entries()) await addSeller(sybil, `sybil-${i}`, '4.2');
    const flood: request.Response[] = [];
    for (const [i, sybil] of sybils.entries()) {
      for (let n = 0; n < 11; n++)
        flood.push(await widgetSession(sybil.publishableKey, `sybil-${i}`, `198.51.100.${i}`));
    }
    expect(flood.map((r) => r.status)).toEqual(Array(44).fill(201));
    // Each sybil held its share (10 of the 40 amounts); its 11th session got a deposit address instead.
    for (let i = 0; i < 4; i++) {
      const own = flood.slice(i * 11, i * 11 + 11).map((r) => r.body.matching);
      expect(own).toEqual([...Array(10).fill('amount'), 'deposit_address']);
    }
    const byAmount = flood.filter((r) => r.body.matching === 'amount').map((r) => r.body);
    expect(new Set(byAmount.map((b) => b.exactAmount)).size).toBe(40);
    for (const b of byAmount) {
      expect(b.walletAddress).toBe(testWallets.checkoutEscrow.address);
      expect(parseUsdc(b.exactAmount) - 4_200_000n).toBeGreaterThanOrEqual(1n);
      expect(parseUsdc(b.exactAmount) - 4_200_000n).toBeLessThanOrEqual(40n);
    }

    // The honest seller's widget sessions at the crowded price: created, not refused, each at an address of its
    // own at exactly the price.
    const honest = await widgetSession(other.publishableKey, 'shop-item');
    const honest2 = await widgetSession(other.publishableKey, 'shop-item');
    expect([honest.status, honest2.status]).toEqual([201, 201]);
    expect([honest.body.matching, honest2.body.matching]).toEqual(['deposit_address', 'deposit_address']);
    expect([honest.body.exactAmount, honest2.body.exactAmount]).toEqual(['4.200000', '4.200000']);
    expect(honest.body.walletAddress).not.toBe(honest2.body.walletAddress);
    expect(honest.body.walletAddress).not.toBe(testWallets.checkoutEscrow.address);

    // Sessions of one price paid at the same time: each transfer pays only the session it was meant for.
    const sybilSession = byAmount[0]!;
    const toHonest = transferEvent('4.2', { to: honest.body.walletAddress });
    const toSybil = transferEvent(sybilSession.exactAmount, { to: testWallets.checkoutEscrow.address });
    await Promise.all([h.publish('transfer.observed', toHonest), h.publish('transfer.observed', toSybil)]);
    const paid = async (id: string) =>
      waitFor(
        async () => {
          const body = (await request(h.url).get(`/api/v1/checkout/sessions/${id}`)).body;
          return body.status === 'paid' ? body : undefined;
        },
        { message: `session ${id} paid` },
      );
    expect(await paid(honest.body.sessionId)).toMatchObject({
      txHash: toHonest.txHash.toLowerCase(),
      paidAmount: '4.200000',
    });
    expect(await paid(sybilSession.sessionId)).toMatchObject({ txHash: toSybil.txHash.toLowerCase() });
    expect(
      (await request(h.url).get(`/api/v1/checkout/sessions/${honest2.body.sessionId}`)).body.status,
    ).toBe('open');

    // Once the flood's late windows pass, the price's amounts are free again (here: the request path releases them).
    h.clock.advanceSeconds(900 + 86_400 + 1);
    const again = await widgetSession(other.publishableKey, 'shop-item');
    expect({ status: again.status, matching: again.body.matching }).toEqual({
      status: 201,
      matching: 'amount',
    });
  });

  it('caps the open sessions of a seller (429 too_many_open_sessions until one expires)', async () => {
    nextMinute();
    const open = Number(
      (
        await h.service.ctx.db
          .selectFrom('sessions')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .where('seller_id', '=', h.sellerId)
          .where('status', '=', 'open')
          .executeTakeFirstOrThrow()
      ).n,
    );
    expect(open).toBe(0);
    const ordered = () =>
      request(h.url)
        .post('/api/v1/checkout/sessions')
        .set('Authorization', `Bearer ${h.secretKey}`)
        .set('Idempotency-Key', 'order-42')
        .send({ amount: '50', description: 'order 42' });
    const first = await ordered();
    expect(first.status).toBe(201);
    for (let i = open + 1; i < MAX_OPEN; i++) {
      expect((await secretSession(h.secretKey, String(10 + i))).status).toBe(201);
    }
    const refused = await secretSession(h.secretKey, '99');
    expectRetryLater(refused, 'too_many_open_sessions', 900);
    expect(refused.body.error).toMatchObject({ field: 'Authorization' });
    // A retry of a session created before the cap is still its session, not a 429.
    const retried = await ordered();
    expect({ status: retried.status, id: retried.body.sessionId }).toEqual({
      status: 200,
      id: first.body.sessionId,
    });

    // Past expiry nothing is open any more: the seller may open sessions again, at any price.
    h.clock.advanceSeconds(901);
    expect((await secretSession(h.secretKey, '99')).status).toBe(201);
    expect((await secretSession(h.secretKey, '4.2')).status).toBe(201);
  });

  it('rate limits session creation per key and per client address: 429 rate_limited with Retry-After', async () => {
    nextMinute();
    // Per key (a seller's server, through express): even refused bodies count, before anything is looked up.
    const byKey: number[] = [];
    for (let i = 0; i < PER_KEY; i++) byKey.push((await secretSession(h.secretKey, 'x')).status);
    expect(byKey).toEqual(Array(PER_KEY).fill(400));
    const limitedKey = await secretSession(h.secretKey, '1');
    expectRetryLater(limitedKey, 'rate_limited', 60);
    expect(limitedKey.body.error).toMatchObject({ field: 'Authorization', limit: PER_KEY });

    // Per client address (the widget's publishable key, answered by the fast path), over every key it uses.
    nextMinute();
    const client = '203.0.113.7';
    const byClient: number[] = [];
    for (let i = 0; i < PER_CLIENT; i++) {
      const key = i % 2 === 0 ? h.publishableKey : other.publishableKey;
      byClient.push((await widgetSession(key, 'no-such-skill', client)).status);
    }
    expect(byClient).toEqual(Array(PER_CLIENT).fill(404));
    const limitedClient = await widgetSession(other.publishableKey, 'shop-item', client);
    expectRetryLater(limitedClient, 'rate_limited', 60);
    expect(limitedClient.body.error).toMatchObject({ field: 'client', limit: PER_CLIENT });
    expect(limitedClient.headers['access-control-expose-headers']).toMatch(/Retry-After/);
    // Another client is not affected.
    expect((await widgetSession(other.publishableKey, 'shop-item', '203.0.113.8')).status).toBe(201);
  });
});

/**
 * Capacity per price, measured: AMOUNT_SUFFIX_RANGE_MICRO 10000 gives a price 9,999 unique amounts, each held by a
 * session until its late window ends (expiry + 24 h by default), so at most 9,999 sessions of one price (with every
 * price within a cent above it) can be matchable at once. This opens 9,999 sessions of one 0.5 USDC price, all by
 * amount, and the next one at a deposit address, and reports the rate. A measurement (about a minute), so it runs on
 * request:
 *
 *   CHECKOUT_CAPACITY=1 pnpm exec jest --ci services/checkout/test/exhaustion.test.ts -t capacity
 */
(process.env.CHECKOUT_CAPACITY ? describe : describe.skip)('capacity: 9,999 sessions of one price', () => {
  let h: CheckoutHarness;
  beforeAll(async () => {
    h = await startHarness('cocapacity', {
      MAX_OPEN_SESSIONS_PER_SELLER: '0',
      MAX_AMOUNT_SHARE_PERCENT: '100',
    });
  });
  afterAll(() => h.stop());

  it('gives 9,999 sessions of one price each its own amount, and the 10,000th a deposit address', async () => {
    const config = loadConfig(
      h.env.envFor('checkout', {
        USDC_ADDRESS: USDC,
        ESCROW_ADDRESS: ESCROW,
        MAX_OPEN_SESSIONS_PER_SELLER: '0',
        MAX_AMOUNT_SHARE_PERCENT: '100',
      }),
    );
    const store = new SessionStore(h.service.ctx, config);
    const input = {
      sellerId: h.sellerId,
      skillId: null,
      skillName: null,
      endpointId: null,
      description: 'capacity',
      priceMicro: 500_000n,
      holdPeriodHours: 0,
      matching: 'amount' as const,
    };
    const total = 9_999;
    let next = 0;
    const started = performance.now();
    try {
      await Promise.all(
        Array.from({ length: 4 }, async () => {
          while (next < total) {
            next++;
            expect((await store.create(input, undefined)).snapshot.matching).toBe('amount');
          }
        }),
      );
      const seconds = (performance.now() - started) / 1000;
      expect((await store.create(input, undefined)).snapshot.matching).toBe('deposit_address');
      const counts = await sql<{ sessions: string; amounts: string }>`
        select count(*)::text as sessions, count(distinct exact_amount_micro)::text as amounts
        from sessions where price_micro = 500000 and deposit_address is null`.execute(h.service.ctx.db);
      expect(counts.rows[0]).toEqual({ sessions: String(total), amounts: String(total) });
      process.stdout.write(
        `checkout capacity: ${total} sessions of one price in ${seconds.toFixed(1)} s = ${Math.round(total / seconds)} sessions/s\n`,
      );
    } finally {
      await store.close();
    }
  }, 600_000);
});
