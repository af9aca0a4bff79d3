import { randomBytes } from 'node:crypto';
import type { EventData } from '@paygate/contracts';
import { openSchema, waitFor, waitForStreamMessages } from '@paygate/testing';
import { type Kysely, sql } from 'kysely';
import { accountBalance } from '../src/ledger/entries';
import { reconcile } from '../src/reconciliation/reconcile';
import {
  type LedgerHarness,
  OPERATOR_TOKEN,
  observedData,
  paymentData,
  randomTxHash,
  startLedgerHarness,
} from './helpers';

/**
 * Refunds of unmatched transfers (checkout's transfer.refund_requested) on real Postgres and JetStream: booked out
 * of suspense once, out of escrow on refund.completed, refused as conflicts when the transfer is not the
 * operator's to refund, and a refunded transfer can neither pay for anything nor break a reorg.
 */

let h: LedgerHarness;
let db: Kysely<any>;

beforeAll(async () => {
  h = await startLedgerHarness('ledgerunmatched');
  db = openSchema(h.env.schemaFor('escrow-ledger'));
});
afterAll(async () => {
  await db?.destroy();
  await h?.stop();
});

const refundRequest = (
  observed: EventData<'transfer.observed'>,
  overrides: Partial<EventData<'transfer.refund_requested'>> = {},
): EventData<'transfer.refund_requested'> => ({
  refundRequestId: `trr_${randomBytes(12).toString('hex')}`,
  transferId: `tr_${randomBytes(12).toString('hex')}`,
  chainId: observed.chainId,
  txHash: observed.txHash,
  logIndex: observed.logIndex,
  from: observed.from,
  amount: observed.amount,
  reason: 'no order found',
  requestedAt: new Date().toISOString(),
  ...overrides,
});

const refundsOf = async (txHash: string) =>
  (await sql<any>`select * from refunds where tx_hash = ${txHash.toLowerCase()}`.execute(db)).rows;
const conflictsOf = async (txHash: string) =>
  (
    await sql<any>`select kind, detail from payment_conflicts where tx_hash = ${txHash.toLowerCase()} order by id`.execute(
      db,
    )
  ).rows;
const handled = (eventId: string) =>
  waitFor(
    async () => (await sql`select 1 from inbox where event_id = ${eventId}`.execute(db)).rows.length > 0,
    {
      timeoutMs: 10_000,
      message: `event ${eventId} handled`,
    },
  );

async function expectBooksConsistent() {
  const report = await reconcile(db, h.ledger.deps.config, await accountBalance(db, 'escrow_asset'));
  expect(report.differences).toEqual([]);
}

/** An unmatched transfer booked into suspense. */
async function strayTransfer(amount: string) {
  const observed = observedData(paymentData(h.sellerId, { amount }));
  await h.publish('transfer.observed', observed);
  await waitFor(
    async () =>
      (await sql`select 1 from transfers where tx_hash = ${observed.txHash}`.execute(db)).rows.length > 0,
    { message: 'transfer booked' },
  );
  return observed;
}

describe('refunds of unmatched transfers', () => {
  test('booked out of suspense once, then out of escrow when settlement sent it', async () => {
    const suspense0 = await accountBalance(db, 'suspense');
    const escrow0 = await accountBalance(db, 'escrow_asset');
    const observed = await strayTransfer('4.2');
    expect(await accountBalance(db, 'suspense')).toBe(suspense0 + 4_200_000n);

    const request = refundRequest(observed);
    await h.publish('transfer.refund_requested', request);
    // The same transfer again, as another request: one refund per transfer.
    const second = await h.publish('transfer.refund_requested', refundRequest(observed));
    await handled(second);
    const [refund] = await refundsOf(observed.txHash);
    expect(await refundsOf(observed.txHash)).toHaveLength(1);
    expect(refund).toMatchObject({
      kind: 'unmatched_transfer',
      status: 'pending',
      transaction_id: null,
      seller_id: null,
      payer: observed.from.toLowerCase(),
      amount_micro: 4_200_000n,
      phase: 'in_suspense',
      transfer_refund_request_id: request.refundRequestId,
    });
    expect(await accountBalance(db, 'suspense')).toBe(suspense0);
    expect(await accountBalance(db, 'refund_pending')).toBe(4_200_000n);
    const suspenseView = await h.http('/api/v1/operator/ledger/suspense', { key: OPERATOR_TOKEN });
    expect((suspenseView.body.data as any[]).some((t) => t.txHash === observed.txHash)).toBe(false);
    const initiated = await waitForStreamMessages(
      h.bus,
      'refund.initiated',
      (e) => (e.data as any).refundId === refund.id,
    );
    expect(initiated.map((e) => e.data)).toEqual([
      expect.objectContaining({
        kind: 'unmatched_transfer',
        transactionId: null,
        sellerId: null,
        transfer: { txHash: observed.txHash, logIndex: 0 },
        payer: observed.from.toLowerCase(),
        amount: '4.2',
      }),
    ]);

    const done = await h.publish('refund.completed', {
      event: 'refund.completed',
      refundId: refund.id,
      kind: 'unmatched_transfer',
      transactionId: null,
      sellerId: null,
      refundTxHash: randomTxHash(),
      amount: '4.2',
      completedAt: new Date().toISOString(),
    });
    await handled(done);
    expect((await refundsOf(observed.txHash))[0].status).toBe('completed');
    expect(await accountBalance(db, 'refund_pending')).toBe(0n);
    expect(await accountBalance(db, 'escrow_asset')).toBe(escrow0);
    const listed = await h.http('/api/v1/operator/ledger/unmatched-refunds', { key: OPERATOR_TOKEN });
    expect(listed.body.data[0]).toMatchObject({ refundId: refund.id, status: 'completed', amount: '4.2' });
    await expectBooksConsistent();

    // The refunded transfer cannot pay for anything now, nor can a reorg take it out of suspense twice.
    const late = paymentData(h.sellerId, { txHash: observed.txHash, amount: '4.2' });
    await h.publish('payment.confirmed', late);
    await waitFor(async () => (await conflictsOf(observed.txHash)).length > 0, { message: 'conflict' });
    expect(await conflictsOf(observed.txHash)).toEqual([
      expect.objectContaining({ kind: 'transfer_refunded' }),
    ]);
    expect(
      (await sql`select 1 from transactions where tx_hash = ${observed.txHash}`.execute(db)).rows,
    ).toHaveLength(0);
    const { confirmations: _c, observedAt: _o, ...transfer } = observed;
    const reorg = await h.publish('transfer.reorged', { ...transfer, reorgedAt: new Date().toISOString() });
    await handled(reorg);
    expect((await conflictsOf(observed.txHash)).map((c) => c.kind)).toEqual([
      'transfer_refunded',
      'reorg_after_refund',
    ]);
    expect(await accountBalance(db, 'suspense')).toBe(suspense0);
  });

  test('a request that arrives before the transfer is booked is retried, then booked', async () => {
    const observed = observedData(paymentData(h.sellerId, { amount: '1.5' }));
    // The positive signal that the early request was handled (and refused for now): the consumer's retry notice.
    const retried: string[] = [];
    const warn = jest.spyOn(h.ledger.ctx.logger, 'warn').mockImplementation(((fields: {
      eventId?: string;
    }) => {
      if (fields?.eventId) retried.push(fields.eventId);
    }) as never);
    let requestId: string;
    try {
      requestId = await h.publish('transfer.refund_requested', refundRequest(observed));
      await waitFor(() => retried.includes(requestId), { message: 'early refund request tried once' });
    } finally {
      warn.mockRestore();
    }
    expect(await refundsOf(observed.txHash)).toHaveLength(0);
    await h.publish('transfer.observed', observed);
    const refund = await waitFor(async () => (await refundsOf(observed.txHash))[0], {
      timeoutMs: 10_000,
      message: 'refund booked on redelivery',
    });
    expect(refund).toMatchObject({ amount_micro: 1_500_000n, status: 'pending' });
    await expectBooksConsistent();
  });

  test('refused as conflicts: claimed by a payment, reorged away, or differing from the books', async () => {
    const payment = paymentData(h.sellerId, { amount: '3' });
    const paidTransfer = observedData(payment);
    await h.publish('transfer.observed', paidTransfer);
    await h.publish('payment.confirmed', payment);
    await waitFor(
      async () =>
        (await sql`select 1 from transactions where tx_hash = ${payment.txHash}`.execute(db)).rows.length > 0,
      { message: 'payment booked' },
    );
    const claimed = await h.publish('transfer.refund_requested', refundRequest(paidTransfer));

    const gone = await strayTransfer('2');
    const { confirmations: _c, observedAt: _o, ...goneTransfer } = gone;
    await handled(
      await h.publish('transfer.reorged', { ...goneTransfer, reorgedAt: new Date().toISOString() }),
    );
    const reorged = await h.publish('transfer.refund_requested', refundRequest(gone));

    const stray = await strayTransfer('6');
    const differs = await h.publish('transfer.refund_requested', refundRequest(stray, { amount: '60' }));
    for (const id of [claimed, reorged, differs]) await handled(id);

    const reasons = async (txHash: string) =>
      (await conflictsOf(txHash)).filter((c) => c.kind === 'refund_refused').map((c) => c.detail.reason);
    expect(await reasons(payment.txHash)).toEqual(['transfer_claimed_by_payment']);
    expect(await reasons(gone.txHash)).toEqual(['transfer_reorged']);
    expect(await reasons(stray.txHash)).toEqual(['amount_differs']);
    for (const t of [payment.txHash, gone.txHash, stray.txHash]) expect(await refundsOf(t)).toHaveLength(0);
    const conflicts = await h.http('/api/v1/operator/ledger/conflicts', { key: OPERATOR_TOKEN });
    expect((conflicts.body.data as any[]).filter((c) => c.kind === 'refund_refused')).toHaveLength(3);
    await expectBooksConsistent();
  });
});
