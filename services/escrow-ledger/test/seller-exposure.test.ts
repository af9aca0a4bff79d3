import { newRefundRequestSigning } from '@paygate/agent-client';
import { refundRequestMessage } from '@paygate/protocol';
import { openSchema, waitFor } from '@paygate/testing';
import { Wallet } from 'ethers';
import { type Kysely, sql } from 'kysely';
import { releaseDueHolds } from '../src/holds/release';
import { accountBalance } from '../src/ledger/entries';
import { reconcile } from '../src/reconciliation/reconcile';
import { type LedgerHarness, paymentData, randomTxHash, startLedgerHarness } from './helpers';
import { payoutEvents } from './payout-events';

/**
 * Escrow is shared by every seller: a refund or payout is paid only from what the ledger says that party still
 * has there. These tests fail on a ledger that lets a seller's balance go negative at will (the seller then
 * drains other sellers' money by refunding its own paid-out purchases), that releases or pays out a payment
 * whose buyer asked for a refund, or that pays the platform more than its revenue.
 */
const BUYER_KEY = '0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a'; // the default payer
const PAYOUT_ADDRESS = '0x90F79bf6EB2c4f870365E785982E1f101E93b906';
const TREASURY = '0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65';

let h: LedgerHarness;
let db: Kysely<any>;
let payouts: ReturnType<typeof payoutEvents>;

beforeAll(async () => {
  h = await startLedgerHarness('exposure');
  db = openSchema(h.env.schemaFor('escrow-ledger'));
  payouts = payoutEvents(h, db);
  await payouts.knowAddress(h.sellerId, PAYOUT_ADDRESS.toLowerCase());
});
afterAll(async () => {
  await db?.destroy();
  await h?.stop();
});

async function pay(amount: string, holdPeriodHours: number) {
  const payment = paymentData(h.sellerId, { amount, holdPeriodHours });
  await h.publish('payment.confirmed', payment);
  return waitFor(
    async () =>
      (await sql<any>`select * from transactions where tx_hash = ${payment.txHash}`.execute(db)).rows[0],
    { message: 'payment booked' },
  );
}

const release = () => releaseDueHolds(h.ledger.ctx, h.ledger.deps, 100);

/** Reserves the seller's available balance and books the payout as sent, as settlement would. */
async function paidOut(settlementId: string) {
  const reply = await payouts.reserve({ settlementId, sellerId: h.sellerId, minimumAmount: '1' });
  if (!reply.ok) throw new Error(`nothing reserved: ${reply.reason}`);
  await payouts.complete({
    settlementId,
    sellerId: h.sellerId,
    amount: reply.amount,
    payoutAddress: PAYOUT_ADDRESS,
    txHash: randomTxHash(),
  });
  await waitFor(async () => (await accountBalance(db, 'seller_payout_pending', h.sellerId)) === 0n, {
    message: 'payout booked',
  });
  return reply.amount;
}

const refund = (transactionId: string, amount: string) =>
  h.http('/api/v1/refunds', { body: { transactionId, amount, reason: 'customer asked' } });

async function report() {
  return reconcile(db, h.ledger.deps.config, await accountBalance(db, 'escrow_asset'));
}

describe('a seller spends only its own money in the shared escrow', () => {
  test('concurrent refunds after payout: only what the seller still has pays; the rest is 409 naming the shortfall', async () => {
    // Three 2 USDC sales paid out (5.7 to the seller), then 1.9 still held from a fourth sale.
    const sold = [await pay('2', 0), await pay('2', 0), await pay('2', 0)];
    await release();
    expect(await paidOut('stl_exposure_1')).toBe('5.7');
    const held = await pay('2', 24);

    // Refunding all three at once: the held 1.9 covers exactly one seller part; the others would be paid with
    // other sellers' money.
    const answers = await Promise.all(sold.map((txn) => refund(txn.id, '2')));
    expect(answers.map((a) => a.status).sort()).toEqual([201, 409, 409]);
    for (const refused of answers.filter((a) => a.status === 409)) {
      expect(refused.body.error).toEqual(
        expect.objectContaining({
          code: 'insufficient_seller_balance',
          available: '-1.9',
          held: '1.9',
          creditLimit: '0',
          sellerAmount: '1.9',
          shortfall: '1.9',
          field: 'amount',
        }),
      );
    }
    expect((await h.http('/api/v1/balances')).body).toMatchObject({
      held: '1.9',
      available: '0',
      owed: '1.9',
    });

    // The held sale cannot be refunded either now: its 1.9 is what covers the debt.
    const heldRefund = await refund(held.id, '2');
    expect(heldRefund.status).toBe(409);
    expect(heldRefund.body.error).toMatchObject({ code: 'insufficient_seller_balance', shortfall: '1.9' });

    // Owed, but covered: nothing is uncovered, the books balance.
    const books = await report();
    expect(books.exposure).toEqual({
      owedBySellers: '1.9',
      uncovered: '0',
      creditGranted: '0',
      owedByPayers: '0',
    });
    expect(books.differences).toEqual([]);

    // When the held sale is released it nets the debt; the seller's balance never went below zero.
    h.clock.advanceHours(25);
    await release();
    expect(await accountBalance(db, 'seller_available', h.sellerId)).toBe(0n);
    expect((await report()).differences).toEqual([]);
  });

  test("a buyer's pending refund request keeps the payment from being released or paid out until it is decided", async () => {
    const buyer = new Wallet(BUYER_KEY);
    const ask = async (transactionId: string) => {
      const signing = newRefundRequestSigning(31337, h.clock.now());
      const signature = await buyer.signMessage(
        refundRequestMessage({ transactionId }, 'never arrived', signing),
      );
      const answer = await h.http('/api/v1/refund-requests', {
        key: null,
        body: { transactionId, reason: 'never arrived', ...signing, signature },
      });
      expect(answer.status).toBe(201);
      return answer.body.refundRequestId as string;
    };
    const disputedHeld = await pay('10', 1);
    const heldRequest = await ask(disputedHeld.id);
    h.clock.advanceHours(2);
    await release();
    expect(
      (await sql<any>`select escrow_status from transactions where id = ${disputedHeld.id}`.execute(db))
        .rows[0].escrow_status,
    ).toBe('held');

    // A released payment disputed afterwards stays out of the payout; the undisputed one goes.
    const disputedReleased = await pay('4', 0);
    const undisputed = await pay('2', 0);
    await release();
    const releasedRequest = await ask(disputedReleased.id);
    expect(
      await payouts.reserve({ settlementId: 'stl_exposure_2', sellerId: h.sellerId, minimumAmount: '1' }),
    ).toMatchObject({ ok: true, amount: '1.9' });
    const statuses = await sql<any>`select id, escrow_status from transactions
        where id in (${disputedReleased.id}, ${undisputed.id}) order by id`.execute(db);
    expect(Object.fromEntries(statuses.rows.map((r: any) => [r.id, r.escrow_status]))).toEqual({
      [disputedReleased.id]: 'available',
      [undisputed.id]: 'payout_pending',
    });

    // Decided: the held one is released on the next pass, both are paid out in the next payout.
    for (const id of [heldRequest, releasedRequest]) {
      expect((await h.http(`/api/v1/refund-requests/${id}/reject`, { body: {} })).status).toBe(200);
    }
    await release();
    expect(
      await payouts.reserve({ settlementId: 'stl_exposure_3', sellerId: h.sellerId, minimumAmount: '1' }),
    ).toMatchObject({ ok: true, amount: '13.3' });
  });

  test('the platform revenue is paid to the treasury once, only what the account holds, and reconciles', async () => {
    const revenue = await accountBalance(db, 'platform_revenue');
    expect(revenue).toBeGreaterThan(0n);
    const escrowBefore = await accountBalance(db, 'escrow_asset');
    const first = await payouts.requestPlatformPayout('ppo_1', TREASURY);
    expect(first).toEqual({
      ok: true,
      amount: (Number(revenue) / 1e6).toString(),
      payoutAddress: TREASURY.toLowerCase(),
    });
    // Once per payoutId; a second payout finds nothing left.
    expect(await payouts.requestPlatformPayout('ppo_1', TREASURY)).toEqual(first);
    expect(await payouts.requestPlatformPayout('ppo_2', TREASURY)).toMatchObject({
      ok: false,
      reason: 'nothing_available',
    });
    if (!first.ok) throw new Error('nothing reserved');
    const amount = first.amount;
    // Given up (the transfer failed): the revenue comes back, and can be paid out again.
    await payouts.fail({ payoutId: 'ppo_1', kind: 'platform', sellerId: null, amount });
    expect(await accountBalance(db, 'platform_revenue')).toBe(revenue);
    expect(await payouts.requestPlatformPayout('ppo_3', TREASURY)).toEqual(first);
    await h.publish('revenue.paid_out', {
      payoutId: 'ppo_3',
      amount,
      treasuryAddress: TREASURY,
      txHash: randomTxHash(),
      completedAt: new Date().toISOString(),
    });
    await waitFor(async () => (await accountBalance(db, 'platform_payout_pending')) === 0n, {
      message: 'platform payout booked',
    });
    expect(await accountBalance(db, 'escrow_asset')).toBe(escrowBefore - revenue);
    expect(await accountBalance(db, 'platform_revenue')).toBe(0n);
    expect((await report()).differences).toEqual([]);
  });
});
