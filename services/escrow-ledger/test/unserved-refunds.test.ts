import type { EventData } from '@paygate/contracts';
import { openSchema, waitFor, waitForConsumerIdle } from '@paygate/testing';
import { type Kysely, sql } from 'kysely';
import { type LedgerHarness, observedData, paymentData, randomTxHash, startLedgerHarness } from './helpers';

/**
 * A paid call its seller failed whose window closed unserved (payment.call_unserved) is refunded by the ledger,
 * once, from the hold, without the seller: the payer's refunds go out as one transfer once they reach the
 * threshold (or the oldest its maximum age); a call served on a retry, or without a seller failure, is not.
 */
let h: LedgerHarness;
let db: Kysely<any>;
const CALL_OUTCOME_WINDOW_MS = 30_000;

beforeAll(async () => {
  h = await startLedgerHarness('ledgerunserved', {
    UNSERVED_SWEEP_INTERVAL_MS: '100',
    UNSERVED_REFUND_THRESHOLD: '0.01',
    UNSERVED_REFUND_MAX_AGE_MS: '3600000',
    CALL_OUTCOME_WINDOW_MS: String(CALL_OUTCOME_WINDOW_MS),
  });
  db = openSchema(h.env.schemaFor('escrow-ledger'));
});
afterAll(async () => {
  await db?.destroy();
  await h?.stop();
});

async function pay(overrides: Partial<EventData<'payment.confirmed'>> = {}) {
  const payment = paymentData(h.sellerId, { holdPeriodHours: 48, ...overrides });
  await h.publish('transfer.observed', observedData(payment));
  await h.publish('payment.confirmed', payment);
  await waitFor(async () => {
    const { body } = await h.http(`/api/v1/transactions?txHash=${payment.txHash}`);
    return body.data[0]?.transactionId as string | undefined;
  });
  return payment;
}

function failed(payment: EventData<'payment.confirmed'>): EventData<'payment.call_failed'> {
  return {
    paymentId: payment.paymentId,
    sellerId: payment.sellerId,
    skillId: payment.skillId,
    attempt: 1,
    upstreamOutcome: 'error_status',
    upstreamStatus: 500,
    failedAt: h.clock.now().toISOString(),
    retryUntil: new Date(h.clock.nowMs() + 600_000).toISOString(),
  };
}

function closed(payment: EventData<'payment.confirmed'>): EventData<'payment.call_unserved'> {
  return {
    paymentId: payment.paymentId,
    sellerId: payment.sellerId,
    attempts: 1,
    retryUntil: new Date(h.clock.nowMs() + 600_000).toISOString(),
    closedAt: new Date(h.clock.nowMs() + 605_000).toISOString(),
  };
}

const lookup = async (txHash: string) => (await h.http(`/api/v1/transactions/lookup?txHash=${txHash}`)).body;

const outboxOf = async (type: string) =>
  (
    await sql<{ envelope: any }>`select envelope from outbox where envelope->>'type' = ${type}
      order by id`.execute(db)
  ).rows.map((r) => r.envelope);

const held = async () =>
  BigInt(
    (
      await sql<{ b: string }>`select coalesce(sum(balance_micro), 0)::text as b from accounts
        where kind = 'seller_held' and owner = ${h.sellerId}`.execute(db)
    ).rows[0]!.b,
  );

describe('escrow-ledger: unserved calls are refunded', () => {
  it('refunds a call its seller failed once its window closed: from the hold, once, sent as a batch and completed by its transfer', async () => {
    const payment = await pay({ amount: '0.5' });
    await h.publish('payment.call_failed', failed(payment));
    await waitFor(async () => (await lookup(payment.txHash)).outcome === 'retryable');
    const heldBefore = await held();
    const closing = closed(payment);
    const eventId = await h.publish('payment.call_unserved', closing);
    // The same event again (another message id): decided once.
    await h.publish('payment.call_unserved', closing, { id: eventId, msgId: `${eventId}-again` });
    await h.publish('payment.call_unserved', closing);
    const pending = await waitFor(async () => {
      const found = await lookup(payment.txHash);
      return found.outcome === 'refund_pending' ? found : undefined;
    });
    await waitForConsumerIdle(h.bus, 'ledger-payment-call-unserved');
    expect(pending).toMatchObject({ refundableAmount: '0', refundReason: 'unserved: error_status 500' });
    expect(heldBefore - (await held())).toBe(475_000n);
    const refunds = await db
      .selectFrom('refunds')
      .selectAll()
      .where('transaction_id', '=', pending.transactionId)
      .execute();
    expect(refunds).toMatchObject([
      { kind: 'payment', phase: 'in_escrow', amount_micro: 500_000n, status: 'pending' },
    ]);
    const refunded = (await outboxOf('payment.refunded')).filter(
      (e) => e.data.paymentId === payment.paymentId,
    );
    expect(refunded).toHaveLength(1);
    expect(refunded[0].data).toMatchObject({ reason: 'unserved', amount: '0.5', upstreamStatus: 500 });
    const sent = (await outboxOf('refund.initiated')).filter(
      (e) => e.data.payer.toLowerCase() === payment.payer.toLowerCase() && e.data.amount === '0.5',
    );
    expect(sent).toHaveLength(1);
    expect(sent[0].data).toMatchObject({ kind: 'unserved_batch', transactionId: null, sellerId: null });

    const refundTxHash = randomTxHash();
    await h.publish('refund.completed', {
      event: 'refund.completed',
      refundId: sent[0].data.refundId,
      kind: 'unserved_batch',
      transactionId: null,
      sellerId: null,
      refundTxHash,
      amount: '0.5',
      completedAt: h.clock.now().toISOString(),
    });
    const done = await waitFor(async () => {
      const found = await lookup(payment.txHash);
      return found.outcome === 'refunded' ? found : undefined;
    });
    expect(done.refundTxHash).toBe(refundTxHash);
    const { body: txn } = await h.http(`/api/v1/transactions/${done.transactionId}`);
    expect(txn).toMatchObject({ status: 'refunded', refunds: [{ status: 'completed', refundTxHash }] });
    const balanced = await sql<{ n: number }>`select count(*)::int as n from account_balance_drift`.execute(
      db,
    );
    expect(balanced.rows[0]!.n).toBe(0);
  });

  it('never refunds a call served on a retry, nor one whose seller never failed it', async () => {
    const servedAgain = await pay();
    await h.publish('payment.call_failed', failed(servedAgain));
    await h.publish('payment.call_recovered', {
      paymentId: servedAgain.paymentId,
      sellerId: servedAgain.sellerId,
      attempt: 2,
      upstreamStatus: 200,
      servedAt: h.clock.now().toISOString(),
    });
    await waitForConsumerIdle(h.bus, 'ledger-payment-call-recovered');
    await h.publish('payment.call_unserved', closed(servedAgain));
    await waitFor(async () => {
      const row = await db
        .selectFrom('unserved_calls')
        .select('status')
        .where('payment_id', '=', servedAgain.paymentId)
        .executeTakeFirst();
      return row?.status === 'served';
    });
    expect(await lookup(servedAgain.txHash)).toMatchObject({ outcome: 'served', refundableAmount: '10' });

    // Closed without any seller failure (only the buyer's body failed): it waits, and is never refunded.
    const buyerFault = await pay();
    await h.publish('payment.call_unserved', closed(buyerFault));
    await waitForConsumerIdle(h.bus, 'ledger-payment-call-unserved');
    expect(await lookup(buyerFault.txHash)).toMatchObject({ outcome: 'unserved', refundableAmount: '10' });
  });

  it('a failure heard after the window closed (another consumer) is refunded by the sweep', async () => {
    const late = await pay({ amount: '0.2' });
    await h.publish('payment.call_unserved', closed(late));
    await waitForConsumerIdle(h.bus, 'ledger-payment-call-unserved');
    expect(await lookup(late.txHash)).toMatchObject({ outcome: 'unserved' });
    await h.publish('payment.call_failed', failed(late));
    await waitFor(async () => (await lookup(late.txHash)).outcome === 'refund_pending');
  });

  it("accrues a payer's small refunds until they reach the threshold, then sends them as one transfer; the rest at its maximum age", async () => {
    const payer = '0x00000000000000000000000000000000000a11ce';
    const small = [];
    for (let i = 0; i < 3; i += 1) small.push(await pay({ amount: '0.004', payer }));
    const batchesOf = async () =>
      (await outboxOf('refund.initiated')).filter((e) => e.data.payer.toLowerCase() === payer);
    for (const [i, payment] of small.entries()) {
      await h.publish('payment.call_failed', failed(payment));
      await h.publish('payment.call_unserved', closed(payment));
      await waitFor(async () => (await lookup(payment.txHash)).outcome === 'refund_pending');
      // 0.004 and 0.008 wait; the third makes 0.012, past the 0.01 threshold: one transfer for the three.
      if (i < 2) expect(await batchesOf()).toEqual([]);
    }
    const batches = await waitFor(async () => {
      const found = await batchesOf();
      return found.length > 0 ? found : undefined;
    });
    expect(batches.map((b) => b.data.amount)).toEqual(['0.012']);

    const alone = await pay({ amount: '0.001', payer });
    await h.publish('payment.call_failed', failed(alone));
    await h.publish('payment.call_unserved', closed(alone));
    await waitFor(async () => (await lookup(alone.txHash)).outcome === 'refund_pending');
    expect(await batchesOf()).toHaveLength(1);
    // An hour later (UNSERVED_REFUND_MAX_AGE_MS) it goes out alone.
    h.clock.advanceHours(1.01);
    try {
      const after = await waitFor(async () => {
        const found = await batchesOf();
        return found.length === 2 ? found : undefined;
      });
      expect(after[1].data.amount).toBe('0.001');
    } finally {
      h.clock.advanceHours(-1.01);
    }
  });

  it('holds back the release of a payment whose call failed until its refund is decided', async () => {
    const payment = await pay({ holdPeriodHours: 0, amount: '0.3' });
    await h.publish('payment.call_failed', failed(payment));
    await waitForConsumerIdle(h.bus, 'ledger-payment-call-failed');
    await h.ledger.scheduler.tick();
    const { body } = await h.http(`/api/v1/transactions?txHash=${payment.txHash}`);
    expect(body.data[0]).toMatchObject({ escrowStatus: 'held' });
    await h.publish('payment.call_unserved', closed(payment));
    const done = await waitFor(async () => {
      const found = await lookup(payment.txHash);
      return found.outcome === 'refund_pending' ? found : undefined;
    });
    const refunds = await db
      .selectFrom('refunds')
      .select(['phase'])
      .where('transaction_id', '=', done.transactionId)
      .execute();
    expect(refunds).toEqual([{ phase: 'in_escrow' }]);
  });

  it('a 0 h hold call payment stays held for CALL_OUTCOME_WINDOW_MS after its claim, so a failure reported in it is refunded from the hold, not from what a payout may already have taken', async () => {
    const available = async () =>
      BigInt(
        (
          await sql<{ b: string }>`select coalesce(sum(balance_micro), 0)::text as b from accounts
            where kind = 'seller_available' and owner = ${h.sellerId}`.execute(db)
        ).rows[0]!.b,
      );
    const statusOf = async (txHash: string) =>
      (await h.http(`/api/v1/transactions?txHash=${txHash}`)).body.data[0]?.escrowStatus;
    const availableBefore = await available();

    // Served (no failure reported): released once the window passed, not before.
    const served = await pay({ holdPeriodHours: 0, amount: '0.2' });
    // The failing call, claimed the same moment; its seller's 500 is reported within the window.
    const failing = await pay({ holdPeriodHours: 0, amount: '0.3' });
    await h.ledger.scheduler.tick();
    expect([await statusOf(served.txHash), await statusOf(failing.txHash)]).toEqual(['held', 'held']);
    expect(await available()).toBe(availableBefore);
    h.clock.advance(CALL_OUTCOME_WINDOW_MS - 1_000);
    await h.publish('payment.call_failed', failed(failing));
    await waitForConsumerIdle(h.bus, 'ledger-payment-call-failed');
    await h.ledger.scheduler.tick();
    expect(await statusOf(served.txHash)).toBe('held');

    h.clock.advance(2_000);
    await h.ledger.scheduler.tick();
    expect([await statusOf(served.txHash), await statusOf(failing.txHash)]).toEqual(['available', 'held']);
    // Only the served call's share can be paid out.
    expect((await available()) - availableBefore).toBe(190_000n);
    await h.publish('payment.call_unserved', closed(failing));
    const done = await waitFor(async () => {
      const found = await lookup(failing.txHash);
      return found.outcome === 'refund_pending' ? found : undefined;
    });
    const refunds = await db
      .selectFrom('refunds')
      .select(['phase', 'amount_micro'])
      .where('transaction_id', '=', done.transactionId)
      .execute();
    expect(refunds).toEqual([{ phase: 'in_escrow', amount_micro: 300_000n }]);
    expect((await available()) - availableBefore).toBe(190_000n);
  });
});
