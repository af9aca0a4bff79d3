import { splitFee } from '@paygate/money';
import fc from 'fast-check';
import type { EscrowStatus, TransactionRow } from '../src/db';
import { refundView } from '../src/refunds/book';
import { requestView } from '../src/refunds/requests';
import { SERVED_AT_ONCE } from '../src/views/call-outcomes';
import { transactionStatus, transactionView } from '../src/views/routes';
import { TRANSACTION_STATUSES } from '../src/views/schemas';

/** What a seller reads of a transaction, a refund and a refund request: one status, amounts as decimal strings. */

const ESCROW_STATUSES: EscrowStatus[] = ['held', 'available', 'payout_pending', 'settled', 'reversed'];
const T = new Date('2026-11-22T10:00:00Z');

function row(amountMicro: bigint, refundedMicro: bigint, escrow: EscrowStatus): TransactionRow {
  const { sellerMicro, platformMicro } = splitFee(amountMicro);
  return {
    id: 'txn_01KAQ3T0000X7Q0E4W9T6B2M8C',
    payment_id: 'pay_unit',
    source: 'x402',
    seller_id: 'sel_unit',
    skill_id: null,
    skill_name: 'weather',
    session_id: null,
    payer: '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC',
    chain_id: 8453,
    network: 'base',
    tx_hash: `0x${'ab'.repeat(32)}`,
    log_index: 0,
    amount_micro: amountMicro,
    seller_share_micro: sellerMicro,
    platform_share_micro: platformMicro,
    refunded_micro: refundedMicro,
    hold_period_hours: 48,
    hold_until: new Date(T.getTime() + 48 * 3_600_000),
    escrow_status: escrow,
    settlement_id: null,
    confirmed_at: T,
    released_at: null,
    settled_at: null,
    reversed_at: null,
    created_at: T,
  } as TransactionRow;
}

describe("a transaction's status", () => {
  it('is reversed first, then refunded in full or in part, then where the money sits (settling for a payout)', () => {
    expect(transactionStatus(row(100n, 100n, 'reversed'))).toBe('reversed');
    expect(transactionStatus(row(100n, 100n, 'settled'))).toBe('refunded');
    expect(transactionStatus(row(100n, 1n, 'held'))).toBe('partially_refunded');
    expect(transactionStatus(row(100n, 0n, 'payout_pending'))).toBe('settling');
    expect(transactionStatus(row(100n, 0n, 'available'))).toBe('available');
  });

  it('is always one the list filter accepts, and refunded exactly when all of it was refunded', () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 1n, max: 10n ** 12n }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.constantFrom(...ESCROW_STATUSES),
        (amount, share, escrow) => {
          const refunded = BigInt(Math.floor(Number(amount) * share));
          const status = transactionStatus(row(amount, refunded, escrow));
          expect(TRANSACTION_STATUSES).toContain(status);
          expect(status === 'refunded').toBe(escrow !== 'reversed' && refunded === amount);
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('the transaction view', () => {
  it('says amounts as decimal strings, the shares as booked, what remains refundable (none once reversed)', () => {
    const view = transactionView(row(1_000_000n, 250_000n, 'payout_pending'));
    expect(view).toMatchObject({
      status: 'partially_refunded',
      escrowStatus: 'settling',
      amount: '1',
      sellerAmount: '0.95',
      platformFee: '0.05',
      refundedAmount: '0.25',
      refundableAmount: '0.75',
      holdUntil: '2026-11-24T10:00:00.000Z',
      releasedAt: null,
      ...SERVED_AT_ONCE,
    });
    expect(transactionView(row(1_000_000n, 0n, 'reversed')).refundableAmount).toBe('0');
    const failed = { ...SERVED_AT_ONCE, callStatus: 'failed' as const };
    expect(transactionView(row(1n, 0n, 'held'), failed).callStatus).toBe('failed');
  });

  it('a refund and a refund request read as the seller and the buyer see them', () => {
    expect(
      refundView({
        id: 'rfd_1',
        kind: 'payment',
        transaction_id: 'txn_1',
        seller_id: 'sel_unit',
        payer: '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC',
        chain_id: 8453,
        amount_micro: 400_000n,
        seller_part_micro: 380_000n,
        platform_part_micro: 20_000n,
        phase: 'in_escrow',
        reason: 'customer asked',
        status: 'pending',
        refund_request_id: null,
        tx_hash: null,
        log_index: null,
        transfer_refund_request_id: null,
        refund_tx_hash: null,
        created_at: T,
        completed_at: null,
      }),
    ).toEqual({
      refundId: 'rfd_1',
      transactionId: 'txn_1',
      amount: '0.4',
      sellerAmount: '0.38',
      platformFeeReturned: '0.02',
      phase: 'in_escrow',
      status: 'pending',
      reason: 'customer asked',
      refundRequestId: null,
      refundTxHash: null,
      createdAt: T.toISOString(),
      completedAt: null,
    });
    const request = {
      id: 'rrq_1',
      transaction_id: 'txn_1',
      reason: 'not delivered',
      status: 'approved',
      refund_id: 'rfd_1',
      decision_reason: null,
      created_at: T,
      decided_at: T,
      completed_at: null,
    } as unknown as Parameters<typeof requestView>[0];
    expect(requestView(request)).toMatchObject({
      refundRequestId: 'rrq_1',
      refund: null,
      decidedAt: T.toISOString(),
    });
    expect(
      requestView({
        ...request,
        refund_status: 'completed',
        refund_amount_micro: 1_500_000n,
        refund_tx_hash: '0xabc',
      }).refund,
    ).toEqual({ status: 'completed', amount: '1.5', refundTxHash: '0xabc' });
  });
});
