import { newRefundRequestSigning } from '@paygate/agent-client';
import { parseUsdc } from '@paygate/money';
import { refundRequestMessage } from '@paygate/protocol';
import { EventRecorder, openSchema, waitFor } from '@paygate/testing';
import { Wallet } from 'ethers';
import { type Kysely, sql } from 'kysely';
import { releaseDueHolds } from '../src/holds/release';
import { accountBalance } from '../src/ledger/entries';
import { reconcile } from '../src/reconciliation/reconcile';
import {
  bookClaimedPayments,
  claimedPaymentOf,
  type LedgerHarness,
  OPERATOR_TOKEN,
  OTHER_SELLER_KEY,
  observedData,
  paymentData,
  randomTxHash,
  startLedgerHarness,
} from './helpers';
import { PAYOUT_ADDRESS, payoutEvents } from './payout-events';

const BUYER_KEY = '0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a';
const STRANGER_KEY = '0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba';

let h: LedgerHarness;
let db: Kysely<any>;

beforeAll(async () => {
  h = await startLedgerHarness('ledger');
  db = openSchema(h.env.schemaFor('escrow-ledger'));
});
afterAll(async () => {
  await db?.destroy();
  await h?.stop();
});

const transactionFor = async (txHash: string) =>
  waitFor(
    async () =>
      (await sql<any>`select * from transactions where tx_hash = ${txHash.toLowerCase()}`.execute(db))
        .rows[0],
    { timeoutMs: 10_000, message: 'transaction booked' },
  );

async function pay(overrides: Parameters<typeof paymentData>[1] = {}) {
  const payment = paymentData(h.sellerId, overrides);
  const observed = observedData(payment);
  await h.publish('transfer.observed', observed);
  // The ledger confirms a payment when its claim books it, on its own clock.
  const clock = h.clock.now();
  if (overrides.confirmedAt) h.clock.set(overrides.confirmedAt);
  try {
    await h.publish('payment.confirmed', payment);
  } finally {
    h.clock.set(clock);
  }
  const txn = await transactionFor(payment.txHash);
  return { payment, txn, observed };
}

/** The ledger is internally consistent: no account drifts from its postings, the trial balance holds. */
async function expectBooksConsistent() {
  const escrow = await accountBalance(db, 'escrow_asset');
  const report = await reconcile(db, h.ledger.deps.config, escrow);
  expect(report.differences).toEqual([]);
}

describe('ledger', () => {
  test('a payment moves from suspense into holds (95/5); redelivery and a second claim credit nothing', async () => {
    const escrowBefore = await accountBalance(db, 'escrow_asset');
    const platformBefore = await accountBalance(db, 'platform_held');
    const payment = paymentData(h.sellerId, { amount: '10.000001' });
    await h.publish('transfer.observed', observedData(payment));
    await waitFor(async () => (await accountBalance(db, 'escrow_asset')) === escrowBefore + 10_000_001n);
    expect((await h.http('/api/v1/operator/ledger/suspense', { key: OPERATOR_TOKEN })).body.data).toEqual(
      expect.arrayContaining([expect.objectContaining({ txHash: payment.txHash, amount: '10.000001' })]),
    );
    expect(await h.claim(payment)).toMatchObject({ ok: true, fresh: true, paymentId: payment.paymentId });
    // The same command again (a retry) is answered with the same booking and books nothing.
    expect(await h.claim(payment)).toMatchObject({ ok: true, fresh: false, paymentId: payment.paymentId });
    // Another payment claiming the same transfer (say a checkout match after the x402 proof) is refused.
    expect(
      await h.claim({ ...payment, paymentId: 'pay_other_claim', source: 'checkout', sessionId: 'cs_other' }),
    ).toMatchObject({ ok: false, reason: 'claimed_elsewhere' });
    const txn = await transactionFor(payment.txHash);
    expect(txn.seller_share_micro).toBe(9_500_000n); // floor(10.000001 * 95%)
    expect(txn.platform_share_micro).toBe(500_001n);
    // Refused by the claim, it reached no booking: nothing for an operator to resolve.
    expect((await h.http('/api/v1/operator/ledger/conflicts', { key: OPERATOR_TOKEN })).body.data).toEqual(
      [],
    );
    const count = await sql<{
      n: bigint;
    }>`select count(*)::bigint as n from transactions where tx_hash = ${payment.txHash}`.execute(db);
    expect(count.rows[0]!.n).toBe(1n);
    expect(await accountBalance(db, 'seller_held', h.sellerId)).toBe(9_500_000n);
    expect(await accountBalance(db, 'platform_held')).toBe(platformBefore + 500_001n);
    expect(await accountBalance(db, 'escrow_asset')).toBe(escrowBefore + 10_000_001n);
    expect((await h.http('/api/v1/operator/ledger/conflicts')).status).toBe(401);
    await expectBooksConsistent();
  });

  test('money that matches nothing stays in suspense; payment before observation books the transfer once', async () => {
    const suspenseBefore = await accountBalance(db, 'suspense');
    const stray = paymentData(h.sellerId, { amount: '3.33' });
    await h.publish('transfer.observed', observedData(stray));
    await waitFor(async () => (await accountBalance(db, 'suspense')) === suspenseBefore + 3_330_000n);
    const early = paymentData(h.sellerId, { amount: '2' });
    await h.publish('payment.confirmed', early);
    await transactionFor(early.txHash);
    await h.publish('transfer.observed', observedData(early, '2.5')); // transfer carried more than the payment
    await waitFor(async () => (await accountBalance(db, 'suspense')) === suspenseBefore + 3_830_000n);
    await expectBooksConsistent();
  });

  test('the database refuses unbalanced entries, postings to nothing, edits, deletes and balances below the floor', async () => {
    await expect(
      db.transaction().execute(async (trx) => {
        await sql`select post_entry('bad-1', 'test', null, null, ${JSON.stringify([
          { kind: 'escrow_asset', side: 'debit', amount: '5' },
          { kind: 'suspense', side: 'credit', amount: '4' },
        ])}::jsonb, null)`.execute(trx);
      }),
    ).rejects.toThrow(/does not balance/);
    await expect(sql`update postings set amount_micro = amount_micro + 1`.execute(db)).rejects.toThrow(
      /postings refuses UPDATE/,
    );
    await expect(sql`delete from journal_entries`.execute(db)).rejects.toThrow(
      /journal_entries refuses DELETE/,
    );
    await expect(sql`delete from accounts`.execute(db)).rejects.toThrow(/accounts refuses DELETE/);
    // A transfer's hash: 0x and exactly 64 lowercase hex digits.
    for (const txHash of [`0x${'a'.repeat(63)}`, `0x${'a'.repeat(65)}`, `0x${'A'.repeat(64)}`]) {
      await expect(
        sql`insert into transfer_claims (chain_id, tx_hash, log_index, claim_id, claimed_via, reference, payer,
            amount_micro, claimed_at)
          values (31337, ${txHash}, 0, ${`clm_hex_${txHash.length}_${txHash[2]}`}, 'verify', 'hex-check',
            '0x0000000000000000000000000000000000000001', 1, now())`.execute(db),
      ).rejects.toThrow(/transfer_claims_tx_hash_check/);
    }
    // A posting's entry and account are checked per statement (no per-row foreign keys).
    const [entry] = (
      await sql<{ id: bigint }>`select id from journal_entries order by id limit 1`.execute(db)
    ).rows;
    const [account] = (await sql<{ id: bigint }>`select max(id) as id from accounts`.execute(db)).rows;
    await expect(
      sql`insert into postings (entry_id, account_id, side, amount_micro) values
        (${entry!.id}, ${account!.id + 1000n}, 'debit', 1), (${entry!.id}, ${account!.id}, 'credit', 1)`.execute(
        db,
      ),
    ).rejects.toThrow(/posting to account \d+, which does not exist/);
    await expect(
      sql`insert into postings (entry_id, account_id, side, amount_micro) values
        (-1, ${account!.id}, 'debit', 1), (-1, ${account!.id}, 'credit', 1)`.execute(db),
    ).rejects.toThrow(/posting to journal entry -1, which does not exist/);
    const held = await accountBalance(db, 'platform_held');
    await expect(
      sql`select post_entry('bad-2', 'test', null, null, ${JSON.stringify([
        { kind: 'platform_held', side: 'debit', amount: String(held + 1n) },
        { kind: 'refund_pending', side: 'credit', amount: String(held + 1n) },
      ])}::jsonb, null)`.execute(db),
    ).rejects.toThrow(/balance_above_floor/);
  });

  test('holds release when the (injected) clock passes hold_until; escrow.released is published', async () => {
    const released = new EventRecorder(h.bus, 'escrow.released');
    const { txn } = await pay({ amount: '1', holdPeriodHours: 48 });
    h.clock.advanceHours(47);
    await releaseDueHolds(h.ledger.ctx, h.ledger.deps, 100);
    expect((await h.http(`/api/v1/transactions/${txn.id}`)).body.status).toBe('held');
    h.clock.advanceHours(1);
    await h.ledger.scheduler.tick();
    const view = (await h.http(`/api/v1/transactions/${txn.id}`)).body;
    expect(view.status).toBe('available');
    expect(view.history.map((e: any) => e.type)).toEqual(['payment_held', 'released']);
    // Other holds of this suite are released too: wait for this transaction's event, not just any.
    const event = await waitFor(() => released.events.find((e: any) => e.data.transactionId === txn.id));
    expect(event.data).toMatchObject({
      amount: '0.95',
      sellerId: h.sellerId,
    });
    released.stop();
    await expectBooksConsistent();
  });

  test('two replicas releasing at once release each hold exactly once', async () => {
    const payments = await Promise.all(
      [1, 2, 3, 4, 5, 6].map(() => pay({ amount: '1', holdPeriodHours: 1 })),
    );
    h.clock.advanceHours(2);
    const counts = await Promise.all([
      releaseDueHolds(h.ledger.ctx, h.ledger.deps, 3),
      releaseDueHolds(h.ledger.ctx, h.ledger.deps, 3),
      releaseDueHolds(h.ledger.ctx, h.ledger.deps, 3),
    ]);
    await releaseDueHolds(h.ledger.ctx, h.ledger.deps, 100);
    const ids = payments.map((p) => p.txn.id);
    const entries = await sql<{
      n: bigint;
    }>`select count(*)::bigint as n from journal_entries where entry_type = 'release'
        and transaction_id in (${sql.join(ids)})`.execute(db);
    expect(entries.rows[0]!.n).toBe(6n);
    expect(counts.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(6);
  });

  test('refunds: instant from the hold, partial ones cannot exceed the original, concurrent ones neither, Idempotency-Key honoured', async () => {
    const initiated = new EventRecorder(h.bus, 'refund.initiated');
    const { txn } = await pay({ amount: '10', holdPeriodHours: 72 });
    const heldBefore = await accountBalance(db, 'seller_held', h.sellerId);
    const first = await h.http('/api/v1/refunds', {
      body: { transactionId: txn.id, amount: '4', reason: 'partial' },
      headers: { 'Idempotency-Key': 'refund-a' },
    });
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({
      amount: '4',
      sellerAmount: '3.8',
      platformFeeReturned: '0.2',
      phase: 'in_escrow',
      status: 'pending',
      remainingRefundable: '6',
    });
    const replay = await h.http('/api/v1/refunds', {
      body: { transactionId: txn.id, amount: '4', reason: 'partial' },
      headers: { 'Idempotency-Key': 'refund-a' },
    });
    expect(replay.body).toEqual(first.body);
    // Marked as a replay, like checkout's and registry's idempotent routes.
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const reused = await h.http('/api/v1/refunds', {
      body: { transactionId: txn.id, amount: '5', reason: 'partial' },
      headers: { 'Idempotency-Key': 'refund-a' },
    });
    expect(reused.status).toBe(409);
    expect(reused.body.error).toMatchObject({
      code: 'idempotency_key_reused',
      field: 'Idempotency-Key',
      rule: 'must not be reused with a different body',
    });
    expect(await accountBalance(db, 'seller_held', h.sellerId)).toBe(heldBefore - 3_800_000n);

    // Two concurrent refunds of 4 on the 6 that remain: exactly one wins.
    const racing = await Promise.all([
      h.http('/api/v1/refunds', { body: { transactionId: txn.id, amount: '4', reason: 'race' } }),
      h.http('/api/v1/refunds', { body: { transactionId: txn.id, amount: '4', reason: 'race' } }),
    ]);
    expect(racing.map((r) => r.status).sort()).toEqual([201, 409]);
    const tooMuch = racing.find((r) => r.status === 409)!;
    expect(tooMuch.body.error).toMatchObject({
      code: 'amount_exceeds_refundable',
      field: 'amount',
      rule: 'must be at most 2',
    });
    const last = await h.http('/api/v1/refunds', {
      body: { transactionId: txn.id, amount: '2', reason: 'rest' },
    });
    expect(last.status).toBe(201);
    const view = (await h.http(`/api/v1/transactions/${txn.id}`)).body;
    expect(view).toMatchObject({ status: 'refunded', refundedAmount: '10', refundableAmount: '0' });
    expect(await accountBalance(db, 'seller_held', h.sellerId)).toBe(heldBefore - 9_500_000n);

    const bad = await h.http('/api/v1/refunds', {
      body: { transactionId: txn.id, amount: '1.0000001', reason: 'x' },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.field).toBe('amount');
    const foreign = await h.http('/api/v1/refunds', {
      key: OTHER_SELLER_KEY,
      body: { transactionId: txn.id, amount: '1', reason: 'x' },
    });
    expect(foreign.status).toBe(404);

    // Settlement sends the USDC and says so; the ledger books the outflow and completes the refund.
    const mine = await waitFor(() => {
      const found = initiated.events.filter((e: any) => e.data.transactionId === txn.id);
      return found.length >= 3 ? found : undefined;
    });
    expect(mine).toHaveLength(3);
    expect(mine[0]!.data).toMatchObject({ payer: txn.payer, chainId: 31337 });
    const escrowBefore = await accountBalance(db, 'escrow_asset');
    for (const e of mine as any[]) {
      await h.publish('refund.completed', {
        event: 'refund.completed',
        refundId: e.data.refundId,
        transactionId: txn.id,
        sellerId: h.sellerId,
        refundTxHash: randomTxHash(),
        amount: e.data.amount,
        completedAt: new Date().toISOString(),
      });
    }
    await waitFor(async () => (await accountBalance(db, 'escrow_asset')) === escrowBefore - 10_000_000n);
    const refunds = (await h.http(`/api/v1/transactions/${txn.id}`)).body.refunds;
    expect(refunds.map((r: any) => r.status)).toEqual(['completed', 'completed', 'completed']);
    expect(await accountBalance(db, 'refund_pending')).toBe(0n);
    initiated.stop();
    await expectBooksConsistent();
  });

  test('the transaction list filters by confirmation time, skill and tx hash (the dashboard filters)', async () => {
    const early = await pay({
      amount: '1',
      skillName: 'filter-early',
      confirmedAt: '2026-01-05T10:00:00.000Z',
    });
    const late = await pay({
      amount: '2',
      skillName: 'filter-late',
      confirmedAt: '2026-01-07T23:59:00.000Z',
    });
    const ids = async (query: string) =>
      (
        (await h.http(`/api/v1/transactions?limit=200&${query}`)).body.data as Array<{
          transactionId: string;
        }>
      )
        .map((t) => t.transactionId)
        .filter((id) => id === early.txn.id || id === late.txn.id);
    expect(await ids('confirmedFrom=2026-01-06')).toEqual([late.txn.id]);
    expect(await ids('confirmedBefore=2026-01-06')).toEqual([early.txn.id]);
    expect(await ids('confirmedFrom=2026-01-05T10:00:00Z&confirmedBefore=2026-01-08')).toEqual([
      late.txn.id,
      early.txn.id,
    ]);
    expect(await ids('skill=filter-late')).toEqual([late.txn.id]);
    expect(await ids(`txHash=${early.payment.txHash.toUpperCase().replace('0X', '0x')}`)).toEqual([
      early.txn.id,
    ]);
    const notADay = await h.http('/api/v1/transactions?confirmedFrom=2026-02-30');
    expect([notADay.status, notADay.body.error.field]).toEqual([400, 'confirmedFrom']);
    const badHash = await h.http('/api/v1/transactions?txHash=0x12');
    expect(badHash.body.error).toMatchObject({
      field: 'txHash',
      rule: 'must be a 0x-prefixed 32-byte hex transaction hash',
    });
  });

  test('payouts: reserve is idempotent per settlementId, refund after settlement leaves the seller owing, recovered next time', async () => {
    const seller = h.otherSellerId;
    // Decided from settlement.due (validated against its event schema), answered in the ledger's outbox.
    const payouts = payoutEvents(h, db);
    await payouts.knowAddress(seller);
    const payFor = async (amount: string) => {
      const payment = paymentData(seller, { amount, holdPeriodHours: 0 });
      await h.publish('payment.confirmed', payment);
      return transactionFor(payment.txHash);
    };
    const a = await payFor('4');
    await releaseDueHolds(h.ledger.ctx, h.ledger.deps, 100);
    expect(
      await payouts.reserve({
        settlementId: 'stl_1',
        sellerId: seller,
        minimumAmount: '10',
      }),
    ).toEqual({
      ok: false,
      reason: 'below_minimum',
      available: '3.8',
    });
    expect(
      await payouts.reserve({
        settlementId: 'stl_none',
        sellerId: 'sel_nobody',
        minimumAmount: '10',
      }),
    ).toMatchObject({ ok: false, reason: 'nothing_available' });
    await payFor('8'); // accumulates: 3.8 + 7.6
    await releaseDueHolds(h.ledger.ctx, h.ledger.deps, 100);
    const reserve = { settlementId: 'stl_2', sellerId: seller, minimumAmount: '10' };
    const reserved = { ok: true, amount: '11.4', payoutAddress: PAYOUT_ADDRESS };
    expect(await payouts.reserve(reserve)).toEqual(reserved);
    expect(await payouts.reserve(reserve)).toEqual(reserved);
    expect(await accountBalance(db, 'seller_payout_pending', seller)).toBe(11_400_000n);
    await payouts.complete({
      settlementId: 'stl_2',
      sellerId: seller,
      amount: '11.4',
      payoutAddress: '0x90F79bf6EB2c4f870365E785982E1f101E93b906',
      txHash: randomTxHash(),
    });
    await waitFor(async () => (await accountBalance(db, 'seller_payout_pending', seller)) === 0n);
    expect((await h.http(`/api/v1/transactions/${a.id}`, { key: OTHER_SELLER_KEY })).body.status).toBe(
      'settled',
    );
    // Refund after settlement with nothing left with Paygate: refused, escrow is other sellers' money.
    const refused = await h.http('/api/v1/refunds', {
      key: OTHER_SELLER_KEY,
      body: { transactionId: a.id, amount: '4', reason: 'late' },
    });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({
      code: 'insufficient_seller_balance',
      available: '0',
      held: '0',
      shortfall: '3.8',
    });
    // An operator grants credit: the seller's balance may go negative, and reconciliation reports the exposure.
    const credit = await h.http(`/api/v1/operator/ledger/sellers/${seller}/credit-limit`, {
      method: 'PUT',
      key: OPERATOR_TOKEN,
      body: { creditLimit: '5' },
    });
    expect(credit.body).toMatchObject({ sellerId: seller, creditLimit: '5', held: '0', available: '0' });
    const refund = await h.http('/api/v1/refunds', {
      key: OTHER_SELLER_KEY,
      body: { transactionId: a.id, amount: '4', reason: 'late' },
    });
    const exposed = await reconcile(db, h.ledger.deps.config, await accountBalance(db, 'escrow_asset'));
    expect(exposed.exposure).toMatchObject({ owedBySellers: '3.8', uncovered: '3.8' });
    expect(exposed.differences).toEqual([expect.objectContaining({ difference: '3.8' })]);
    await h.http(`/api/v1/operator/ledger/sellers/${seller}/credit-limit`, {
      method: 'PUT',
      key: OPERATOR_TOKEN,
      body: { creditLimit: '0' },
    });
    expect(refund.body).toMatchObject({
      phase: 'after_release',
      sellerAmount: '3.8',
      platformFeeReturned: '0.2',
    });
    expect((await h.http('/api/v1/balances', { key: OTHER_SELLER_KEY })).body).toMatchObject({
      available: '0',
      owed: '3.8',
      settled: '11.4',
      held: '0',
    });
    expect(
      await payouts.reserve({ settlementId: 'stl_3', sellerId: seller, minimumAmount: '1' }),
    ).toMatchObject({ ok: false, reason: 'nothing_available', available: '-3.8' });
    await payFor('20'); // 19 for the seller, 3.8 of it recovers the debt
    await releaseDueHolds(h.ledger.ctx, h.ledger.deps, 100);
    expect(
      await payouts.reserve({
        settlementId: 'stl_4',
        sellerId: seller,
        minimumAmount: '10',
      }),
    ).toMatchObject({ ok: true, amount: '15.2' });
    // Settlement could not send it: given back, once.
    await payouts.fail({ payoutId: 'stl_4', kind: 'seller', sellerId: seller, amount: '15.2' });
    await payouts.fail({ payoutId: 'stl_4', kind: 'seller', sellerId: seller, amount: '15.2' });
    expect(await accountBalance(db, 'seller_available', seller)).toBe(15_200_000n);
    expect(await accountBalance(db, 'seller_payout_pending', seller)).toBe(0n);
    await expectBooksConsistent();
  });

  test('buyer refund requests: payer-signed only; approve refunds, reject does not', async () => {
    const requested = new EventRecorder(h.bus, 'refund.requested');
    const { txn } = await pay({ amount: '5', holdPeriodHours: 24 });
    const buyer = new Wallet(BUYER_KEY);
    // The signed fields of a request body (chain, a fresh nonce, an expiry) with its signature.
    const signed = async (
      wallet: Wallet,
      reason: string,
      signing = newRefundRequestSigning(31337, h.clock.now()),
    ) => ({
      reason,
      ...signing,
      signature: await wallet.signMessage(refundRequestMessage({ transactionId: txn.id }, reason, signing)),
    });
    const forged = await h.http('/api/v1/refund-requests', {
      key: null,
      body: { transactionId: txn.id, ...(await signed(new Wallet(STRANGER_KEY), 'not mine')) },
    });
    expect(forged.status).toBe(403);
    expect(forged.body.error).toMatchObject({ code: 'not_payer', field: 'signature' });
    const tampered = await h.http('/api/v1/refund-requests', {
      key: null,
      body: { transactionId: txn.id, ...(await signed(buyer, 'original reason')), reason: 'changed reason' },
    });
    expect(tampered.status).toBe(403);

    // A request signed for another chain, or expired, is refused before anything is looked up.
    const otherChain = await h.http('/api/v1/refund-requests', {
      key: null,
      body: {
        transactionId: txn.id,
        ...(await signed(buyer, 'x', newRefundRequestSigning(8453, h.clock.now()))),
      },
    });
    expect([otherChain.status, otherChain.body.error.field]).toEqual([400, 'chainId']);
    const expired = await h.http('/api/v1/refund-requests', {
      key: null,
      body: {
        transactionId: txn.id,
        ...(await signed(buyer, 'x', {
          ...newRefundRequestSigning(31337, h.clock.now()),
          expiresAt: new Date(h.clock.nowMs() - 1000).toISOString(),
        })),
      },
    });
    expect([expired.status, expired.body.error.field]).toEqual([400, 'expiresAt']);
    const tooLong = await h.http('/api/v1/refund-requests', {
      key: null,
      body: {
        transactionId: txn.id,
        ...(await signed(buyer, 'x', {
          ...newRefundRequestSigning(31337, h.clock.now()),
          expiresAt: new Date(h.clock.nowMs() + 48 * 3600_000).toISOString(),
        })),
      },
    });
    expect([tooLong.status, tooLong.body.error.field]).toEqual([400, 'expiresAt']);

    const first = { transactionId: txn.id, ...(await signed(buyer, 'never arrived')) };
    const created = await h.http('/api/v1/refund-requests', { key: null, body: first });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ transactionId: txn.id, status: 'pending', reason: 'never arrived' });
    const event = await waitFor(() => requested.events.find((e: any) => e.data.transactionId === txn.id));
    expect(event.data).toMatchObject({
      event: 'refund.requested',
      transactionId: txn.id,
      reason: 'never arrived',
    });
    const rejected = await h.http(`/api/v1/refund-requests/${created.body.refundRequestId}/reject`, {
      body: { reason: 'delivered' },
    });
    expect(rejected.body).toMatchObject({ status: 'rejected', decisionReason: 'delivered' });
    expect((await h.http(`/api/v1/transactions/${txn.id}`)).body.refundedAmount).toBe('0');
    // The decided request sent again (a captured copy): refused, it is good once.
    const replayed = await h.http('/api/v1/refund-requests', { key: null, body: first });
    expect(replayed.status).toBe(409);
    expect(replayed.body.error).toMatchObject({
      code: 'refund_request_replayed',
      refundRequestId: created.body.refundRequestId,
    });

    const please = { transactionId: txn.id, ...(await signed(buyer, 'please')) };
    const again = await h.http('/api/v1/refund-requests', { key: null, body: please });
    expect(again.status).toBe(201);
    // A retry whose first answer was lost (the same signed request): the request it made, raised once.
    const retried = await h.http('/api/v1/refund-requests', { key: null, body: please });
    expect(retried.status).toBe(200);
    expect(retried.headers.get('idempotent-replayed')).toBe('true');
    expect(retried.body).toEqual(again.body);
    // Another request while one is pending: refused, naming the pending one.
    const another = await h.http('/api/v1/refund-requests', {
      key: null,
      body: { transactionId: txn.id, ...(await signed(buyer, 'changed my mind')) },
    });
    expect(another.status).toBe(409);
    expect(another.body.error).toMatchObject({
      code: 'refund_request_pending',
      refundRequestId: again.body.refundRequestId,
    });
    await waitFor(() =>
      requested.events.some((e: any) => e.data.refundRequestId === again.body.refundRequestId),
    );
    expect(
      requested.events.filter((e: any) => e.data.transactionId === txn.id).map((e: any) => e.data.reason),
    ).toEqual(['never arrived', 'please']);
    expect(
      (
        await sql<{
          n: string;
        }>`select count(*)::text as n from refund_requests where transaction_id = ${txn.id}`.execute(db)
      ).rows[0]!.n,
    ).toBe('2');
    const foreignApprove = await h.http(`/api/v1/refund-requests/${again.body.refundRequestId}/approve`, {
      key: OTHER_SELLER_KEY,
      body: {},
    });
    expect(foreignApprove.status).toBe(404);
    const approved = await h.http(`/api/v1/refund-requests/${again.body.refundRequestId}/approve`, {
      body: {},
    });
    expect(approved.status).toBe(200);
    expect(approved.body).toMatchObject({
      status: 'approved',
      refund: { amount: '5', phase: 'in_escrow', status: 'pending' },
    });
    await h.publish('refund.completed', {
      event: 'refund.completed',
      refundId: approved.body.refund.refundId,
      transactionId: txn.id,
      sellerId: h.sellerId,
      refundTxHash: randomTxHash(),
      amount: '5',
      completedAt: new Date().toISOString(),
    });
    await waitFor(
      async () =>
        (await h.http(`/api/v1/refund-requests/${again.body.refundRequestId}`)).body.status === 'completed',
    );
    requested.stop();
    await expectBooksConsistent();
  });

  test('an Idempotency-Key is any 1-255 visible ASCII characters, as in checkout, registry and notifier', async () => {
    const { txn } = await pay({ amount: '1', holdPeriodHours: 24 });
    const refund = (key: string) =>
      h.http('/api/v1/refunds', {
        body: { transactionId: txn.id, amount: '0.25', reason: 'order #42' },
        headers: { 'Idempotency-Key': key },
      });
    const first = await refund('order#42/refund?1');
    expect(first.status).toBe(201);
    const replay = await refund('order#42/refund?1');
    expect(replay.body.refundId).toBe(first.body.refundId);
    const bad = await refund('k'.repeat(256));
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({
      field: 'Idempotency-Key',
      rule: 'must be 1-255 visible ASCII characters',
    });
  });

  test('approving a request whose transaction the seller already refunded in full is 409 nothing_refundable', async () => {
    const { txn } = await pay({ amount: '2', holdPeriodHours: 24 });
    const buyer = new Wallet(BUYER_KEY);
    const signing = newRefundRequestSigning(31337, h.clock.now());
    const signature = await buyer.signMessage(
      refundRequestMessage({ transactionId: txn.id }, 'broken', signing),
    );
    const created = await h.http('/api/v1/refund-requests', {
      key: null,
      body: { transactionId: txn.id, reason: 'broken', ...signing, signature },
    });
    expect(created.status).toBe(201);
    const direct = await h.http('/api/v1/refunds', {
      body: { transactionId: txn.id, amount: '2', reason: 'refunded directly' },
    });
    expect(direct.status).toBe(201);
    // The seller sent no amount: the answer must not blame a field it did not send.
    const approved = await h.http(`/api/v1/refund-requests/${created.body.refundRequestId}/approve`, {
      body: {},
    });
    expect(approved.status).toBe(409);
    expect(approved.body.error).toMatchObject({ code: 'nothing_refundable' });
    expect(approved.body.error.field).toBeUndefined();
    // Still pending: the seller can reject it.
    const rejected = await h.http(`/api/v1/refund-requests/${created.body.refundRequestId}/reject`, {
      body: { reason: 'already refunded' },
    });
    expect(rejected.body).toMatchObject({ status: 'rejected' });
  });

  test('transfer.reorged reverses the transfer and what its payment caused', async () => {
    const { payment, txn, observed } = await pay({ amount: '6', holdPeriodHours: 24 });
    const escrowBefore = await accountBalance(db, 'escrow_asset');
    const heldBefore = await accountBalance(db, 'seller_held', h.sellerId);
    const { confirmations: _c, observedAt: _o, ...transfer } = observed;
    await h.publish('transfer.reorged', { ...transfer, reorgedAt: new Date().toISOString() });
    await waitFor(async () => (await h.http(`/api/v1/transactions/${txn.id}`)).body.status === 'reversed');
    expect(await accountBalance(db, 'escrow_asset')).toBe(escrowBefore - 6_000_000n);
    expect(await accountBalance(db, 'seller_held', h.sellerId)).toBe(heldBefore - 5_700_000n);
    const reversals = await sql<{
      n: bigint;
    }>`select count(*)::bigint as n from journal_entries where reverses_entry_id is not null
        and (transaction_id = ${txn.id} or idempotency_key = ${`reorg:31337:${payment.txHash}:0`})`.execute(
      db,
    );
    expect(reversals.rows[0]!.n).toBe(2n);
    await expectBooksConsistent();
  });

  test('a released payment reversed after its fee went to the treasury: the platform owes the fee back, and the seller is not paid for it', async () => {
    const { txn, observed } = await pay({ amount: '6', holdPeriodHours: 0 });
    await waitFor(async () => {
      await releaseDueHolds(h.ledger.ctx, h.ledger.deps, 100);
      return (await h.http(`/api/v1/transactions/${txn.id}`)).body.status === 'available';
    });
    // All the platform's revenue is reserved for a payout to the treasury.
    const payoutId = `ppo_reversal_${txn.id}`;
    const payouts = payoutEvents(h, db);
    const reserved = await payouts.requestPlatformPayout(
      payoutId,
      '0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65',
    );
    if (!reserved.ok) throw new Error('nothing reserved');
    expect(await accountBalance(db, 'platform_revenue')).toBe(0n);
    const sellerBefore = await accountBalance(db, 'seller_available', h.sellerId);
    const { confirmations: _c, observedAt: _o, ...transfer } = observed;
    await h.publish('transfer.reorged', { ...transfer, reorgedAt: new Date().toISOString() });
    await waitFor(async () => (await h.http(`/api/v1/transactions/${txn.id}`)).body.status === 'reversed', {
      message: 'the released payment was not reversed',
    });
    expect(await accountBalance(db, 'seller_available', h.sellerId)).toBe(sellerBefore - 5_700_000n);
    expect(await accountBalance(db, 'platform_revenue')).toBe(-300_000n);
    // The payout given up: the reserved revenue comes back, less the fee the platform owes.
    await payouts.fail({ payoutId, kind: 'platform', sellerId: null, amount: reserved.amount });
    expect(await accountBalance(db, 'platform_revenue')).toBe(parseUsdc(reserved.amount) - 300_000n);
    await expectBooksConsistent();
  });

  describe('a transfer reorged away and included again in another block', () => {
    const reorgOf = (observed: ReturnType<typeof observedData>) => {
      const { confirmations: _c, observedAt: _o, ...transfer } = observed;
      return { ...transfer, reorgedAt: new Date().toISOString() };
    };
    const transactionsOf = async (txHash: string) =>
      (
        await sql<any>`select id, payment_id, escrow_status from transactions where tx_hash = ${txHash}
          order by created_at, id`.execute(db)
      ).rows;
    /** A payment booked on its observed transfer, then reversed by a reorg of that transfer's block. */
    const bookedThenReorged = async (payment: ReturnType<typeof paymentData>) => {
      const first = observedData(payment);
      await h.publish('transfer.observed', first);
      await h.publish('payment.confirmed', payment);
      const original = await transactionFor(payment.txHash);
      const escrowBefore = await accountBalance(db, 'escrow_asset');
      const heldBefore = await accountBalance(db, 'seller_held', h.sellerId);
      await h.publish('transfer.reorged', reorgOf(first));
      await waitFor(async () => (await transactionsOf(payment.txHash))[0]?.escrow_status === 'reversed');
      return { first, original, escrowBefore, heldBefore };
    };
    const handled = (eventId: string) =>
      waitFor(
        async () => (await sql`select 1 from inbox where event_id = ${eventId}`.execute(db)).rows.length > 0,
        { message: `event ${eventId} handled` },
      );
    const openConflicts = async (txHash: string) =>
      (
        await sql<any>`select kind from payment_conflicts where tx_hash = ${txHash} and status = 'open'`.execute(
          db,
        )
      ).rows;

    test('the re-match after re-inclusion is credited as a new transaction, not a conflict', async () => {
      // A checkout payment: checkout re-matches its reopened session itself (a gateway payment is re-booked below).
      const payment = paymentData(h.sellerId, {
        amount: '7',
        holdPeriodHours: 24,
        source: 'checkout',
        sessionId: 'cs_reorg_rematch',
      });
      const { first, original, escrowBefore, heldBefore } = await bookedThenReorged(payment);
      expect(await accountBalance(db, 'escrow_asset')).toBe(escrowBefore - 7_000_000n);

      // Mined again in another block; checkout re-matches its reopened session with a new payment id.
      await h.publish('transfer.observed', { ...first, blockNumber: 11, blockHash: randomTxHash() });
      await waitFor(async () => (await accountBalance(db, 'escrow_asset')) === escrowBefore);
      await h.publish('payment.confirmed', { ...payment, paymentId: `${payment.paymentId}_rematch` });
      await waitFor(async () => (await transactionsOf(payment.txHash)).length === 2);
      const [reversed, live] = await transactionsOf(payment.txHash);
      expect(reversed).toMatchObject({ id: original.id, escrow_status: 'reversed' });
      expect(live).toMatchObject({ payment_id: `${payment.paymentId}_rematch`, escrow_status: 'held' });
      expect(await accountBalance(db, 'seller_held', h.sellerId)).toBe(heldBefore);
      expect(await accountBalance(db, 'escrow_asset')).toBe(escrowBefore);
      expect(await openConflicts(payment.txHash)).toEqual([]);
      // A second claim on the re-included transfer is still refused, and books nothing.
      expect(
        await h.claim({ ...payment, paymentId: 'pay_third_claim', source: 'x402', sessionId: null }),
      ).toMatchObject({ ok: false, reason: 'claimed_elsewhere' });
      expect(await transactionsOf(payment.txHash)).toHaveLength(2);
      expect(await openConflicts(payment.txHash)).toEqual([]);
      await expectBooksConsistent();
    });

    test('a gateway payment reversed by the reorg is booked again when its transaction is mined again', async () => {
      const payment = paymentData(h.sellerId, { amount: '4', holdPeriodHours: 24 });
      const { first, original, escrowBefore, heldBefore } = await bookedThenReorged(payment);
      // The gateway served the call and sends no new payment.confirmed: the re-mined transfer is the same money.
      await h.publish('transfer.observed', { ...first, blockNumber: 14, blockHash: randomTxHash() });
      await waitFor(async () => (await transactionsOf(payment.txHash)).length === 2, {
        message: 'the gateway payment was not booked again',
      });
      const [reversed, live] = await transactionsOf(payment.txHash);
      expect(reversed).toMatchObject({ id: original.id, escrow_status: 'reversed' });
      expect(live).toMatchObject({ payment_id: payment.paymentId, escrow_status: 'held' });
      expect(await accountBalance(db, 'seller_held', h.sellerId)).toBe(heldBefore);
      expect(await accountBalance(db, 'escrow_asset')).toBe(escrowBefore);
      expect(await openConflicts(payment.txHash)).toEqual([]);
      await expectBooksConsistent();
    });

    test('a payment that arrives before the re-inclusion is parked, then booked when the transfer is back', async () => {
      const payment = paymentData(h.sellerId, { amount: '3', holdPeriodHours: 24 });
      const { first, escrowBefore } = await bookedThenReorged(payment);
      await h.publish('payment.confirmed', { ...payment, paymentId: `${payment.paymentId}_rematch` });
      await waitFor(async () => (await openConflicts(payment.txHash)).length === 1);
      expect(await openConflicts(payment.txHash)).toEqual([{ kind: 'transfer_reorged' }]);

      await h.publish('transfer.observed', { ...first, blockNumber: 12, blockHash: randomTxHash() });
      await waitFor(async () => (await transactionsOf(payment.txHash)).length === 2);
      expect((await transactionsOf(payment.txHash))[1]).toMatchObject({
        payment_id: `${payment.paymentId}_rematch`,
        escrow_status: 'held',
      });
      expect(await openConflicts(payment.txHash)).toEqual([]);
      expect(await accountBalance(db, 'escrow_asset')).toBe(escrowBefore);
      await expectBooksConsistent();
    });

    test("a transfer.reorged handled before its block's transfer.observed: that observation books nothing", async () => {
      const payment = paymentData(h.sellerId, { amount: '6', holdPeriodHours: 24 });
      const first = observedData(payment);
      const escrowBefore = await accountBalance(db, 'escrow_asset');
      await handled(await h.publish('transfer.reorged', reorgOf(first)));
      await handled(await h.publish('transfer.observed', first));
      expect(await accountBalance(db, 'escrow_asset')).toBe(escrowBefore);
      // The chain went back to that block and the indexer published the transfer again: booked now.
      await h.publish('transfer.observed', { ...first, observedAt: new Date().toISOString() });
      await waitFor(async () => (await accountBalance(db, 'escrow_asset')) === escrowBefore + 6_000_000n);
      await expectBooksConsistent();
    });

    test('a transfer reorged away again from its new block before that block was observed: the late observation books nothing', async () => {
      const payment = paymentData(h.sellerId, { amount: '8', holdPeriodHours: 24 });
      const { first, escrowBefore } = await bookedThenReorged(payment);
      const moved = { ...first, blockNumber: 15, blockHash: randomTxHash() };
      await handled(await h.publish('transfer.reorged', reorgOf(moved)));
      await handled(await h.publish('transfer.observed', moved));
      expect(await accountBalance(db, 'escrow_asset')).toBe(escrowBefore - 8_000_000n);
      // The chain went back to that block: published again, booked again.
      await h.publish('transfer.observed', { ...moved, observedAt: new Date().toISOString() });
      await waitFor(async () => (await accountBalance(db, 'escrow_asset')) === escrowBefore);
      await expectBooksConsistent();
    });

    test('a payment booked between a reorg and its stale transfer.observed is reversed by that observation', async () => {
      const payment = paymentData(h.sellerId, { amount: '5', holdPeriodHours: 24 });
      const first = observedData(payment);
      const escrowBefore = await accountBalance(db, 'escrow_asset');
      // The reorg is handled before the claim (a published event and an RPC race otherwise): it leaves a tombstone.
      await handled(await h.publish('transfer.reorged', reorgOf(first)));
      await h.publish('payment.confirmed', payment);
      await transactionFor(payment.txHash);
      await handled(await h.publish('transfer.observed', first));
      expect((await transactionsOf(payment.txHash)).map((t) => t.escrow_status)).toEqual(['reversed']);
      expect(await accountBalance(db, 'escrow_asset')).toBe(escrowBefore);
      await expectBooksConsistent();
    });

    test("a claim booked before its block's transfer.reorged, then that block's stale transfer.observed: booked nothing", async () => {
      const payment = paymentData(h.sellerId, { amount: '4', holdPeriodHours: 24 });
      const first = observedData(payment);
      const escrowBefore = await accountBalance(db, 'escrow_asset');
      await h.publish('payment.confirmed', payment);
      await transactionFor(payment.txHash);
      // The claim booked the transfer on no block yet: the reorg of its block reverses it.
      await handled(await h.publish('transfer.reorged', reorgOf(first)));
      expect(await accountBalance(db, 'escrow_asset')).toBe(escrowBefore);
      // The observation of the block that left the chain, delivered late: the transfer is not on the chain.
      await handled(await h.publish('transfer.observed', first));
      expect((await transactionsOf(payment.txHash)).map((t) => t.escrow_status)).toEqual(['reversed']);
      expect(await accountBalance(db, 'escrow_asset')).toBe(escrowBefore);
      await expectBooksConsistent();
      // The chain went back to that block and the indexer published the transfer again: booked now.
      await h.publish('transfer.observed', { ...first, observedAt: new Date().toISOString() });
      await waitFor(async () => (await accountBalance(db, 'escrow_asset')) === escrowBefore + 4_000_000n);
      await expectBooksConsistent();
    });

    test('a transfer.reorged for the old block handled after the re-inclusion reverses nothing', async () => {
      const payment = paymentData(h.sellerId, { amount: '2', holdPeriodHours: 24 });
      const first = observedData(payment);
      await h.publish('transfer.observed', first);
      await h.publish('payment.confirmed', payment);
      const txn = await transactionFor(payment.txHash);
      const escrowBefore = await accountBalance(db, 'escrow_asset');
      const moved = { ...first, blockNumber: 13, blockHash: randomTxHash() };
      await h.publish('transfer.observed', moved);
      await waitFor(
        async () =>
          (await sql<any>`select block_hash from transfers where tx_hash = ${payment.txHash}`.execute(db))
            .rows[0]?.block_hash === moved.blockHash,
      );
      const reorgsHandled = async () =>
        (
          await sql<any>`select count(*)::int as n from inbox where consumer = 'ledger-transfer-reorged'`.execute(
            db,
          )
        ).rows[0].n as number;
      const handledBefore = await reorgsHandled();
      await h.publish('transfer.reorged', reorgOf(first));
      await waitFor(async () => (await reorgsHandled()) === handledBefore + 1, {
        message: 'stale reorg handled',
      });
      expect(await accountBalance(db, 'escrow_asset')).toBe(escrowBefore);
      expect((await transactionsOf(payment.txHash))[0]).toMatchObject({ id: txn.id, escrow_status: 'held' });
      await expectBooksConsistent();
    });
  });
});

// Last: its conflicts would count in the operator's conflict list that the tests above read.
describe('ledger: one batch', () => {
  test('one batch mixing first-seen transfers, a redelivery, a second claim, an observed transfer and an overpayment books each as alone', async () => {
    const first = paymentData(h.sellerId, { amount: '3' });
    const redelivered = { ...first };
    const secondClaim = paymentData(h.otherSellerId, {
      amount: '3',
      txHash: first.txHash,
      logIndex: first.logIndex,
    });
    const observedFirst = paymentData(h.sellerId, { amount: '2' });
    const overpaid = paymentData(h.sellerId, { amount: '5' });
    const escrowBefore = await accountBalance(db, 'escrow_asset');
    await h.publish('transfer.observed', observedData(observedFirst));
    await h.publish('transfer.observed', observedData(overpaid, '4'));
    await waitFor(async () => (await accountBalance(db, 'escrow_asset')) === escrowBefore + 6_000_000n);
    const heldBefore = await accountBalance(db, 'seller_held', h.sellerId);
    const otherHeldBefore = await accountBalance(db, 'seller_held', h.otherSellerId);

    await h.ledger.ctx.db
      .transaction()
      .execute((trx) =>
        bookClaimedPayments(
          trx,
          [first, redelivered, secondClaim, observedFirst, overpaid].map(claimedPaymentOf),
          h.ledger.deps,
        ),
      );

    const booked = await sql<{
      payment_id: string;
      tx_hash: string;
    }>`select payment_id, tx_hash from transactions
        where tx_hash in (${first.txHash.toLowerCase()}, ${observedFirst.txHash.toLowerCase()},
          ${overpaid.txHash.toLowerCase()}) order by payment_id`.execute(db);
    expect(booked.rows.map((r) => r.payment_id).sort()).toEqual(
      [first.paymentId, observedFirst.paymentId].sort(),
    );
    const conflicts = await sql<{
      kind: string;
      payment_id: string;
    }>`select kind, payment_id from payment_conflicts
        where tx_hash in (${first.txHash.toLowerCase()}, ${overpaid.txHash.toLowerCase()})`.execute(db);
    expect(conflicts.rows.map((r) => [r.payment_id, r.kind]).sort()).toEqual(
      [
        [secondClaim.paymentId, 'transfer_already_claimed'],
        [overpaid.paymentId, 'amount_exceeds_transfer'],
      ].sort(),
    );
    // 95% of 3 + 2 USDC; the first transfer entered escrow with its payment, once.
    expect(await accountBalance(db, 'seller_held', h.sellerId)).toBe(heldBefore + 4_750_000n);
    expect(await accountBalance(db, 'seller_held', h.otherSellerId)).toBe(otherHeldBefore);
    expect(await accountBalance(db, 'escrow_asset')).toBe(escrowBefore + 9_000_000n);
    const claimedBy = await sql<{ claimed_by_transaction_id: string }>`select claimed_by_transaction_id
        from transfers where tx_hash = ${first.txHash.toLowerCase()}`.execute(db);
    const firstTransaction = await sql<{ id: string }>`select id from transactions
        where payment_id = ${first.paymentId}`.execute(db);
    expect(claimedBy.rows[0]!.claimed_by_transaction_id).toBe(firstTransaction.rows[0]!.id);
    await expectBooksConsistent();
  });
});
