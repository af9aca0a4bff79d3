/**
 * Every booked refund is an on-chain transfer settlement sends from the escrow wallet, on its one nonce, ahead of
 * honest payouts. So a seller may not turn one small payment into thousands of dust refunds: a refund is at least
 * REFUND_MIN_AMOUNT unless it is all that remains refundable, at most REFUND_MAX_PARTIAL_PER_TRANSACTION partial
 * refunds are booked per transaction (the rest in one refund is always accepted), and a seller books at most
 * REFUNDS_PER_MINUTE refunds (429 with Retry-After). On a ledger without these bounds, 20 refunds of 0.000001 of
 * a 0.01 payment are 20 × 201 and 20 escrow transfers.
 *
 *   npx jest --ci services/escrow-ledger/test/refund-dust.test.ts
 */
import { newRefundRequestSigning } from '@paygate/agent-client';
import { refundRequestMessage } from '@paygate/protocol';
import { waitFor } from '@paygate/testing';
import { Wallet } from 'ethers';
import { sql } from 'kysely';
import { type LedgerHarness, OTHER_SELLER_KEY, paymentData, startLedgerHarness } from './helpers';

jest.setTimeout(60_000);

const BUYER_KEY = '0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a'; // the default payer
const PER_MINUTE = 30;
const MAX_PARTIAL = 10;

let h: LedgerHarness;

beforeAll(async () => {
  h = await startLedgerHarness('refunddust', {
    REFUND_MIN_AMOUNT: '0.01',
    REFUND_MAX_PARTIAL_PER_TRANSACTION: String(MAX_PARTIAL),
    REFUNDS_PER_MINUTE: String(PER_MINUTE),
  });
});
afterAll(async () => {
  await h?.stop();
});
// Each test starts in a minute of its own (the rate limit's windows are cut on the ledger's clock).
beforeEach(() => h.clock.advanceHours(1));

async function pay(sellerId: string, amount: string): Promise<string> {
  const data = paymentData(sellerId, { amount, holdPeriodHours: 72 });
  await h.publish('payment.confirmed', data);
  return waitFor(
    async () =>
      (
        await sql<{ id: string }>`select id from transactions where payment_id = ${data.paymentId}`.execute(
          h.ledger.ctx.db,
        )
      ).rows[0]?.id,
    { message: `payment ${data.paymentId} booked`, timeoutMs: 10_000 },
  );
}

const refund = (transactionId: string, amount: string, key?: string) =>
  h.http('/api/v1/refunds', { body: { transactionId, amount, reason: 'dust' }, ...(key ? { key } : {}) });

async function refundsOf(transactionId: string): Promise<number> {
  const rows = await sql<{ n: string }>`select count(*)::text as n from refunds
      where transaction_id = ${transactionId}`.execute(h.ledger.ctx.db);
  return Number(rows.rows[0]!.n);
}

describe('dust refunds cannot queue escrow transfers', () => {
  test('20 refunds of 0.000001 of a 0.01 payment: each refused 400 naming amount and the minimum, nothing booked', async () => {
    const txn = await pay(h.sellerId, '0.01');
    const answers = [];
    for (let i = 0; i < 20; i++) answers.push(await refund(txn, '0.000001'));
    expect(answers.map((a) => a.status)).toEqual(Array(20).fill(400));
    expect(answers[0]!.body.error).toMatchObject({
      code: 'invalid_request',
      field: 'amount',
      rule: 'must be at least 0.01 USDC, or all that remains refundable (0.01)',
      minimum: '0.01',
      refundable: '0.01',
    });
    expect(await refundsOf(txn)).toBe(0);
    // The whole payment is still refundable, in one refund.
    const full = await refund(txn, '0.01');
    expect(full.status).toBe(201);
    expect(full.body.remainingRefundable).toBe('0');
  });

  test('all that remains is refundable even below the minimum; a smaller part of it is not', async () => {
    const small = await pay(h.sellerId, '0.005');
    const all = await refund(small, '0.005');
    expect(all.status).toBe(201);
    expect(all.body).toMatchObject({ amount: '0.005', remainingRefundable: '0' });

    const txn = await pay(h.sellerId, '0.015');
    expect((await refund(txn, '0.01')).status).toBe(201);
    const part = await refund(txn, '0.004');
    expect(part.status).toBe(400);
    expect(part.body.error).toMatchObject({
      field: 'amount',
      rule: 'must be at least 0.01 USDC, or all that remains refundable (0.005)',
    });
    const rest = await refund(txn, '0.005');
    expect(rest.status).toBe(201);
    expect(rest.body.remainingRefundable).toBe('0');
    expect(await refundsOf(txn)).toBe(2);
  });

  test(`at most ${MAX_PARTIAL} partial refunds per transaction; then only all that remains`, async () => {
    const txn = await pay(h.sellerId, '1');
    for (let i = 0; i < MAX_PARTIAL; i++) expect((await refund(txn, '0.01')).status).toBe(201);
    const eleventh = await refund(txn, '0.01');
    expect(eleventh.status).toBe(409);
    expect(eleventh.body.error).toMatchObject({
      code: 'too_many_partial_refunds',
      field: 'amount',
      rule: `after ${MAX_PARTIAL} partial refunds only all that remains refundable (0.9) is accepted`,
      refundable: '0.9',
      maxPartialRefunds: MAX_PARTIAL,
    });
    const rest = await refund(txn, '0.9');
    expect(rest.status).toBe(201);
    expect(rest.body.remainingRefundable).toBe('0');
    expect(await refundsOf(txn)).toBe(MAX_PARTIAL + 1);
  });

  test("a merchant's approval of a buyer's request follows the same minimum", async () => {
    const txn = await pay(h.sellerId, '0.5');
    const signing = newRefundRequestSigning(31337, h.clock.now());
    const signature = await new Wallet(BUYER_KEY).signMessage(
      refundRequestMessage({ transactionId: txn }, 'never arrived', signing),
    );
    const filed = await h.http('/api/v1/refund-requests', {
      key: null,
      body: { transactionId: txn, reason: 'never arrived', ...signing, signature },
    });
    expect(filed.status).toBe(201);
    const id = filed.body.refundRequestId as string;
    const dust = await h.http(`/api/v1/refund-requests/${id}/approve`, { body: { amount: '0.000001' } });
    expect(dust.status).toBe(400);
    expect(dust.body.error).toMatchObject({ field: 'amount', minimum: '0.01' });
    const all = await h.http(`/api/v1/refund-requests/${id}/approve`, { body: {} });
    expect(all.status).toBe(200);
    expect(all.body.refund.amount).toBe('0.5');
  });

  test(`at most ${PER_MINUTE} refunds a minute per seller, then 429 with Retry-After naming the rule`, async () => {
    const txns = await Promise.all([1, 2, 3].map(() => pay(h.otherSellerId, '1')));
    const statuses: number[] = [];
    for (const txn of txns) {
      for (let i = 0; i < PER_MINUTE / txns.length; i++)
        statuses.push((await refund(txn, '0.01', OTHER_SELLER_KEY)).status);
    }
    expect(statuses).toEqual(Array(PER_MINUTE).fill(201));
    const another = await pay(h.otherSellerId, '1');
    const over = await refund(another, '1', OTHER_SELLER_KEY);
    expect(over.status).toBe(429);
    const retryAfter = Number(over.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(over.body.error).toMatchObject({
      code: 'rate_limited',
      limit: PER_MINUTE,
      message: expect.stringContaining(`at most ${PER_MINUTE} refunds per minute per seller`),
    });
    expect(await refundsOf(another)).toBe(0);
    // Per seller: another seller is not held back by it.
    const mine = await pay(h.sellerId, '1');
    expect((await refund(mine, '1')).status).toBe(201);
    // The next minute the seller may refund again.
    h.clock.advance(60_000);
    expect((await refund(another, '1', OTHER_SELLER_KEY)).status).toBe(201);
  });
});
