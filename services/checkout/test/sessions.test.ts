import { CheckoutSessionSnapshot } from '@paygate/contracts';
import { parseUsdc } from '@paygate/money';
import { EventRecorder, waitFor } from '@paygate/testing';
import { sql } from 'kysely';
import request from 'supertest';
import { DEV_CHECKOUT_WALLET, DEV_DEPOSIT_XPUB, loadConfig } from '../src/config';
import {
  CHECKOUT_WALLET,
  type CheckoutHarness,
  ESCROW,
  publishSkill,
  skillEvent,
  startHarness,
} from './helpers';

/** A unique exact amount of this price: price + 1 .. 9,999 micro-USDC, six decimals. */
const expectUniqueAmountOf = (exactAmount: string, priceMicro: bigint) => {
  expect(exactAmount).toMatch(/^\d+\.\d{6}$/);
  const suffix = parseUsdc(exactAmount) - priceMicro;
  expect(suffix).toBeGreaterThanOrEqual(1n);
  expect(suffix).toBeLessThanOrEqual(9_999n);
};

const snapshotKeys = Object.keys(CheckoutSessionSnapshot.properties).sort();

describe('checkout sessions', () => {
  let h: CheckoutHarness;
  beforeAll(async () => {
    h = await startHarness('cosess');
    await publishSkill(h, skillEvent(h, { name: 'one-price' }, ['5']));
    await publishSkill(h, skillEvent(h, { name: 'two-prices' }, ['1', '2']));
    await publishSkill(h, skillEvent(h, { name: 'not-active', status: 'SUSPENDED' }, ['3']));
    await publishSkill(h, skillEvent(h, { name: 'full-range' }, ['7']));
    await publishSkill(h, skillEvent(h, { name: 'tiny-range' }, ['8']));
  });
  afterAll(() => h.stop());

  const pk = () => `Bearer ${h.publishableKey}`;

  it('creates a session with the publishable key at the price of the skill.updated projection', async () => {
    const created = new EventRecorder(h.bus, 'checkout.session_created');
    const res = await request(h.url)
      .post('/api/v1/checkout/sessions')
      .set('Authorization', pk())
      .send({ skill: 'one-price' });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual(snapshotKeys);
    // The exact amount is the price plus a unique sub-cent suffix, paid to the checkout wallet (never the agent
    // escrow) that every session shares.
    expectUniqueAmountOf(res.body.exactAmount, 5_000_000n);
    expect(res.body.walletAddress).toBe(CHECKOUT_WALLET);
    expect(res.body.walletAddress).not.toBe(ESCROW);
    const row = await h.service.ctx.db
      .selectFrom('sessions')
      .select(['deposit_address', 'amount_reserved', 'exact_amount_micro'])
      .where('session_id', '=', res.body.sessionId)
      .executeTakeFirstOrThrow();
    expect(row).toEqual({
      deposit_address: null,
      amount_reserved: true,
      exact_amount_micro: parseUsdc(res.body.exactAmount),
    });
    // What the buyer reads: the skill's name and what the endpoint sells, not its method and path.
    expect(res.body).toMatchObject({
      status: 'open',
      skillId: 'sk_one-price',
      chainId: 31337,
      matching: 'amount',
      description: 'Skill one-price: item 0',
    });
    expect(Date.parse(res.body.expiresAt) - h.clock.now().getTime()).toBe(900_000);
    expect(Date.parse(res.body.lateUntil) - Date.parse(res.body.expiresAt)).toBe(86_400_000);
    const polled = await request(h.url).get(`/api/v1/checkout/sessions/${res.body.sessionId}`);
    expect(polled.status).toBe(200);
    expect(polled.body).toEqual(res.body);
    const [event] = await created.waitForCount(1);
    expect(event!.data).toEqual(res.body);
    created.stop();

    // The browser cannot name its own price.
    const priced = await request(h.url)
      .post('/api/v1/checkout/sessions')
      .set('Authorization', pk())
      .send({ skill: 'one-price', amount: '0.01' });
    expect(priced.status).toBe(400);
    expect(priced.body.error).toMatchObject({ field: 'amount', rule: 'is not an allowed field' });
  });

  it('refuses unknown keys, inactive skills and ambiguous endpoints with 4xx naming the field', async () => {
    const post = (auth: string | undefined, body: object) => {
      const r = request(h.url).post('/api/v1/checkout/sessions');
      if (auth) r.set('Authorization', auth);
      return r.send(body);
    };
    expect((await post(undefined, { skill: 'one-price' })).body.error.field).toBe('Authorization');
    expect((await post('Bearer pk_unknown_0123456789abcdef', { skill: 'one-price' })).status).toBe(401);
    const suspended = await post(pk(), { skill: 'not-active' });
    expect(suspended.status).toBe(409);
    expect(suspended.body.error).toMatchObject({ code: 'skill_not_active', field: 'skill' });
    expect((await post(pk(), { skill: 'no-such-skill' })).status).toBe(404);
    const ambiguous = await post(pk(), { skill: 'two-prices' });
    expect(ambiguous.status).toBe(400);
    expect(ambiguous.body.error.field).toBe('endpointId');
    const second = await post(pk(), { skill: 'two-prices', endpointId: 'ep_two-prices_1' });
    expect(second.status).toBe(201);
    expect(parseUsdc(second.body.exactAmount) / 1_000_000n).toBe(2n);
  });

  it('creates a session for any amount with the secret key', async () => {
    const res = await request(h.url)
      .post('/api/v1/checkout/sessions')
      .set('Authorization', `Bearer ${h.secretKey}`)
      .send({ amount: '12.5', description: 'Order #42' });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ description: 'Order #42', skillId: null, sellerId: h.sellerId });
    expectUniqueAmountOf(res.body.exactAmount, 12_500_000n);
    // The largest amount there is takes no suffix: its session gets a deposit address, at exactly the amount.
    const largest = await request(h.url)
      .post('/api/v1/checkout/sessions')
      .set('Authorization', `Bearer ${h.secretKey}`)
      .send({ amount: '10000000000', description: 'the largest' });
    expect(largest.status).toBe(201);
    expect(largest.body).toMatchObject({ matching: 'deposit_address', exactAmount: '10000000000.000000' });
    const bad = await request(h.url)
      .post('/api/v1/checkout/sessions')
      .set('Authorization', `Bearer ${h.secretKey}`)
      .send({ amount: '1.1234567', description: 'x' });
    expect(bad.status).toBe(400);
    expect(bad.body.error.field).toBe('amount');
    const zero = await request(h.url)
      .post('/api/v1/checkout/sessions')
      .set('Authorization', `Bearer ${h.secretKey}`)
      .send({ amount: '0', description: 'x' });
    expect(zero.body.error.field).toBe('amount');
    // The amount must stay a valid USDC amount (at most 10 billion), or no transfer could ever be matched to
    // the session (every consumer refuses the larger amount).
    const huge = await request(h.url)
      .post('/api/v1/checkout/sessions')
      .set('Authorization', `Bearer ${h.secretKey}`)
      .send({ amount: '10000000000.000001', description: 'x' });
    expect(huge.status).toBe(400);
    expect(huge.body.error).toMatchObject({ field: 'amount', rule: 'must be a USDC amount' });
    const unknown = await request(h.url)
      .post('/api/v1/checkout/sessions')
      .set('Authorization', 'Bearer sk_unknown_0123456789abcdef')
      .send({ amount: '1', description: 'x' });
    expect(unknown.status).toBe(401);
  });

  it('honours Idempotency-Key: same body, same session; other body, 409', async () => {
    const post = (body: object) =>
      request(h.url)
        .post('/api/v1/checkout/sessions')
        .set('Authorization', `Bearer ${h.secretKey}`)
        .set('Idempotency-Key', 'order-77')
        .send(body);
    const [a, b] = await Promise.all([
      post({ amount: '3', description: 'Order 77' }),
      post({ description: 'Order 77', amount: '3' }),
    ]);
    expect([a.status, b.status].sort()).toEqual([200, 201]);
    expect(a.body.sessionId).toBe(b.body.sessionId);
    const again = await post({ amount: '3', description: 'Order 77' });
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.sessionId).toBe(a.body.sessionId);
    const other = await post({ amount: '4', description: 'Order 77' });
    expect(other.status).toBe(409);
    expect(other.body.error.code).toBe('idempotency_key_reused');
    const rows = await h.service.ctx.db
      .selectFrom('sessions')
      .select('session_id')
      .where('price_micro', '=', 3_000_000n)
      .execute();
    expect(rows).toHaveLength(1);
  });

  it('writes the session, its idempotency record and its event together, the event with the allocated amount', async () => {
    const post = (key: string) =>
      request(h.url)
        .post('/api/v1/checkout/sessions')
        .set('Authorization', pk())
        .set('Idempotency-Key', key)
        .send({ skill: 'tiny-range' });
    const first = await post('click-1');
    expect(first.status).toBe(201);
    const outbox = await sql<{ subject: string; envelope: { data: Record<string, unknown> } }>`
      select subject, envelope from outbox where envelope->'data'->>'sessionId' = ${first.body.sessionId}
      order by subject`.execute(h.service.ctx.db);
    expect(outbox.rows.map((r) => r.subject)).toEqual(['checkout.session_created']);
    expect(outbox.rows[0]!.envelope.data).toEqual(first.body);
    const again = await post('click-1');
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    const events = await sql<{ n: string }>`
      select count(*)::text as n from outbox where envelope->'data'->>'sessionId' = ${first.body.sessionId}`.execute(
      h.service.ctx.db,
    );
    expect(Number(events.rows[0]!.n)).toBe(1);
  });

  it('prices from the projection at once after this replica consumes a newer skill.updated', async () => {
    const create = () =>
      request(h.url).post('/api/v1/checkout/sessions').set('Authorization', pk()).send({ skill: 'repriced' });
    await publishSkill(h, skillEvent(h, { name: 'repriced' }, ['11']));
    const before = await create();
    expect(parseUsdc(before.body.exactAmount) / 1_000_000n).toBe(11n);
    await publishSkill(h, skillEvent(h, { name: 'repriced', revision: 2 }, ['12']));
    const after = await create();
    expect(parseUsdc(after.body.exactAmount) / 1_000_000n).toBe(12n);
    await publishSkill(h, skillEvent(h, { name: 'repriced', revision: 3, status: 'SUSPENDED' }, ['12']));
    expect((await create()).status).toBe(409);
  });

  it('gives every concurrent session of one price its own exact amount, all on the one checkout wallet', async () => {
    const count = 60;
    const results = await Promise.all(
      Array.from({ length: count }, () =>
        request(h.url)
          .post('/api/v1/checkout/sessions')
          .set('Authorization', pk())
          .send({ skill: 'full-range' }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array(count).fill(201));
    expect(new Set(results.map((r) => r.body.exactAmount)).size).toBe(count);
    for (const r of results) expectUniqueAmountOf(r.body.exactAmount, 7_000_000n);
    expect(new Set(results.map((r) => r.body.walletAddress))).toEqual(new Set([CHECKOUT_WALLET]));

    // The database itself refuses a second matchable session with an amount, whatever process tries.
    const taken = parseUsdc(results[0]!.body.exactAmount);
    await expect(
      sql`insert into sessions (session_id, seller_id, description, price_micro, exact_amount_micro, status,
            hold_period_hours, created_at, expires_at, late_until, updated_at, amount_reserved)
          values ('cs_dup', 'x', 'dup', 7000000, ${taken}, 'open', 0, now(),
            now() + interval '1 minute', now() + interval '2 minutes', now(), true)`.execute(
        h.service.ctx.db,
      ),
    ).rejects.toThrow(/sessions_reserved_amount/);
  });

  it('expires an open session at expiresAt (on read and by the sweeper) with checkout.session_expired', async () => {
    const expired = new EventRecorder(h.bus, 'checkout.session_expired');
    const a = await request(h.url)
      .post('/api/v1/checkout/sessions')
      .set('Authorization', pk())
      .send({ skill: 'one-price' });
    const b = await request(h.url)
      .post('/api/v1/checkout/sessions')
      .set('Authorization', pk())
      .send({ skill: 'one-price' });
    h.clock.advanceSeconds(899);
    expect((await request(h.url).get(`/api/v1/checkout/sessions/${a.body.sessionId}`)).body.status).toBe(
      'open',
    );
    h.clock.advanceSeconds(2);
    expect((await request(h.url).get(`/api/v1/checkout/sessions/${a.body.sessionId}`)).body.status).toBe(
      'expired',
    );
    await waitFor(async () => {
      const row = await h.service.ctx.db
        .selectFrom('sessions')
        .select('status')
        .where('session_id', '=', b.body.sessionId)
        .executeTakeFirstOrThrow();
      return row.status === 'expired';
    });
    await waitFor(() =>
      [a.body.sessionId, b.body.sessionId].every((id) =>
        expired.events.some((e) => (e.data as any).sessionId === id),
      ),
    );
    expect(expired.events.filter((e) => (e.data as any).sessionId === a.body.sessionId)).toHaveLength(1);
    expired.stop();
    expect((await request(h.url).get('/api/v1/checkout/sessions/cs_nope')).status).toBe(400);
    expect((await request(h.url).get(`/api/v1/checkout/sessions/cs_${'0'.repeat(32)}`)).status).toBe(404);
  });
});

describe('checkout config', () => {
  it('defaults to 15 minute sessions, a 24 hour late window, 9,999 amounts a price, the dev checkout wallet and deposit xpub outside production', () => {
    const config = loadConfig({ USDC_ADDRESS: '0x5FbDB2315678afecb367f032d93F642f64180aa3' });
    expect(config.checkoutEscrowAddress).toBe(DEV_CHECKOUT_WALLET);
    expect(config.checkoutEscrowAddress).not.toBe(config.escrowAddress);
    expect([config.amountSuffixRangeMicro, config.maxAmountSharePercent]).toEqual([10_000, 10]);
    expect(config.sessionTtlSeconds).toBe(900);
    expect(config.lateWindowSeconds).toBe(86_400);
    expect(config.depositXpub).toBe(DEV_DEPOSIT_XPUB);
    expect(() => loadConfig({ USDC_ADDRESS: 'nope' })).toThrow(/USDC_ADDRESS/);
    // Checkout never holds a key that can move deposits.
    expect(() =>
      loadConfig({
        USDC_ADDRESS: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
        CHECKOUT_DEPOSIT_XPUB:
          'xprvA1Fw4j4eedUmpb8E48Sfipcixn7Sqk3QSHs6YDY94oUyR1PhjMotifFTLAioqNaHvePgSR5gopXFLjoeXALAv5unMSv1ZG4ZAtJFf5oGWAQ',
      }),
    ).toThrow(/CHECKOUT_DEPOSIT_XPUB: must be an extended public key/);
  });
});
