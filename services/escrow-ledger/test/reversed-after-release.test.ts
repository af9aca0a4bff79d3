/**
 * A hold is released only once its transfer is CONFIRMATIONS deep, so a payment reversed after its release is a
 * reorg deeper than the holds wait for: the money may already be paid out. Real Postgres and NATS: the reversal
 * takes it back from the seller's available balance (owed), counts it, and the operator finds it listed.
 */
import { waitFor } from '@paygate/testing';
import { type LedgerHarness, OPERATOR_TOKEN, observedData, paymentData, startLedgerHarness } from './helpers';

describe('a payment reversed after its hold was released', () => {
  let h: LedgerHarness;

  beforeAll(async () => {
    h = await startLedgerHarness('reversedafter');
  });

  afterAll(async () => {
    await h?.stop();
  });

  const reversedAfterRelease = () =>
    h.http('/api/v1/operator/ledger/reversed-after-release', { key: OPERATOR_TOKEN });
  const counted = async () =>
    (await h.ledger.deps.metrics.conflicts.get()).values.find(
      (v) => v.labels.kind === 'reversed_after_release',
    )?.value ?? 0;

  it('is listed for the operator and counted; one reversed while held is not', async () => {
    const released = paymentData(h.sellerId, { amount: '4', holdPeriodHours: 0 });
    const held = paymentData(h.sellerId, { amount: '2', holdPeriodHours: 24 });
    // The indexer's observation of each (its block hash is what a reorg of that block names).
    const observed = [released, held].map((payment) => observedData(payment));
    for (const [i, payment] of [released, held].entries()) {
      await h.publish('transfer.observed', observed[i]!);
      expect((await h.claim(payment)).ok).toBe(true);
    }
    await h.ledger.scheduler.tick();
    const transactions = (await h.http('/api/v1/transactions?limit=10')).body.data as any[];
    const heldTxn = transactions.find((t) => t.paymentId === held.paymentId);
    expect(transactions.find((t) => t.paymentId === released.paymentId).status).toBe('available');
    for (const seen of observed) {
      const { confirmations: _c, observedAt: _o, ...transfer } = seen;
      await h.publish('transfer.reorged', { ...transfer, reorgedAt: new Date().toISOString() });
    }
    await waitFor(
      async () => (await h.http(`/api/v1/transactions/${heldTxn.transactionId}`)).body.status === 'reversed',
      {
        message: 'the held payment was not reversed',
      },
    );
    const listed = await waitFor(
      async () => {
        const answer = await reversedAfterRelease();
        return answer.body.data?.length > 0 ? answer.body.data : undefined;
      },
      { message: 'the released payment reversed was not listed' },
    );
    expect(listed).toEqual([
      expect.objectContaining({
        sellerId: h.sellerId,
        paymentId: released.paymentId,
        txHash: released.txHash,
        amount: '4',
        sellerShare: '3.8',
        reversalReason: 'transfer_reorged',
        settlementId: null,
      }),
    ]);
    expect(await counted()).toBe(1);
  });
});
