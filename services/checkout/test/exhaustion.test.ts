import { randomBytes } from 'node:crypto';
import { parseUsdc } from '@paygate/money';
import { testWallets, waitFor } from '@paygate/testing';
import request from 'supertest';
import { type CheckoutHarness, publishSkill, skillEvent, startHarness } from './helpers';

/**
 * Security issue, point 3: checkout amounts could be exhausted by anyone. A price had 9,999 suffixes shared by
 * every seller, each held until expiry + 24 h, and session creation had no limit, so one script blocked a price
 * for a day (503 amount_range_exhausted) for every seller. Now each seller's unpaid sessions may hold only a
 * share of a price's amounts, a seller has a cap on open sessions, and creation is rate limited per key and per
 * client address; every refusal is a 429 with Retry-After. Small figures here so the limits are reached quickly.
 */

const RANGE = 41; // 40 suffixes per price (AMOUNT_SUFFIX_PERCENT 0: the same for every price)
const SHARE_PERCENT = 25; // 10 of them per seller
const MAX_OPEN = 15;
const PER_KEY = 20;
const PER_CLIENT = 30;

describe('no seller can exhaust the unique amounts of another seller; creation is bounded', () => {
  let h: CheckoutHarness;
  const other = {
    sellerId: `sel_other_${randomBytes(3).toString('hex')}`,
    publishableKey: `pk_test_${randomBytes(12).toString('hex')}`,
  };

  beforeAll(async () => {
    h = await startHarness('coexhaust', {
      AMOUNT_SUFFIX_RANGE_MICRO: String(RANGE),
      AMOUNT_SUFFIX_PERCENT: '0',
      MAX_AMOUNT_SHARE_PERCENT: String(SHARE_PERCENT),
      MAX_OPEN_SESSIONS_PER_SELLER: String(MAX_OPEN),
      SESSION_RATE_LIMIT_PER_KEY: String(PER_KEY),
      SESSION_RATE_LIMIT_PER_CLIENT: String(PER_CLIENT),
    });
    // A second, honest seller (a widget on its shop), selling a product at the same price as the flood.
    await h.publish('seller.updated', {
      sellerId: other.sellerId,
      revision: 1,
      walletAddress: testWallets.platform.address,
      payoutAddress: testWallets.platform.address,
      publishableKey: other.publishableKey,
      apiKeyVersion: 1,
      webhookUrl: null,
      webhookSecretVersion: 0,
      settlementFrequency: 'DAILY',
      minimumSettlement: '10',
      updatedAt: new Date().toISOString(),
    });
    await waitFor(
      () =>
        h.running.ctx.db
          .selectFrom('sellers')
          .select('seller_id')
          .where('seller_id', '=', other.sellerId)
          .executeTakeFirst(),
      { message: 'second seller projected' },
    );
    await publishSkill(
      h,
      skillEvent(h, { name: 'shop-item', skillId: 'sk_other_item', sellerId: other.sellerId }, ['4.2']),
    );
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

  it("one seller's flood of a price leaves that price to another seller (429 amount_share_exhausted, not 503 for everyone)", async () => {
    nextMinute();
    const share = Math.floor(((RANGE - 1) * SHARE_PERCENT) / 100);
    const flood: number[] = [];
    for (let i = 0; i < 15; i++) flood.push((await secretSession(h.secretKey, '4.2')).status);
    expect(flood).toEqual([...Array(share).fill(201), ...Array(15 - share).fill(429)]);
    const refused = await secretSession(h.secretKey, '4.2');
    // Held until the late window ends: expiry (15 min) + 24 h.
    expectRetryLater(refused, 'amount_share_exhausted', 900 + 86_400);
    expect(refused.body.error).toMatchObject({ field: 'amount' });
    // A neighbouring price's amounts overlap this one's: the flood counts against its share too (its window
    // holds at least share - 1 of them, so at most one more session there).
    const nearby = [
      (await secretSession(h.secretKey, '4.200001')).status,
      (await secretSession(h.secretKey, '4.200001')).status,
    ];
    expect(nearby).toContain(429);

    // The other seller's widget session at the same price: created (before: 503 amount_range_exhausted once the
    // flood held all 40 amounts).
    const honest = await widgetSession(other.publishableKey, 'shop-item');
    expect(honest.status).toBe(201);
    expect(parseUsdc(honest.body.exactAmount)).toBeGreaterThan(4_200_000n);
    expect(parseUsdc(honest.body.exactAmount)).toBeLessThan(4_200_000n + BigInt(RANGE));
  });

  it('caps the open sessions of a seller (429 too_many_open_sessions until one expires); expired unpaid ones keep their share', async () => {
    nextMinute();
    const open = Number(
      (
        await h.running.ctx.db
          .selectFrom('sessions')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .where('seller_id', '=', h.sellerId)
          .where('status', '=', 'open')
          .executeTakeFirstOrThrow()
      ).n,
    ); // from the flood above
    expect(open).toBeGreaterThanOrEqual(10);
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

    // Past expiry nothing is open any more, but the flood's unpaid amounts stay held for late payments.
    h.clock.advanceSeconds(901);
    expect((await secretSession(h.secretKey, '99')).status).toBe(201);
    expectRetryLater(await secretSession(h.secretKey, '4.2'), 'amount_share_exhausted', 86_400);
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
