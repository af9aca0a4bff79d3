import { MAX_AMOUNT_MICRO, splitFee } from '@paygate/money';
import fc from 'fast-check';
import {
  assertRefundable,
  type RefundSplit,
  refundEntryLines,
  splitRefund,
  type TransactionForRefund,
} from '../src/refunds/book';

/**
 * The 95/5 rule in integer micro-USDC: a payment's seller share is floor(amount × 95 / 100) and the platform has the
 * rest, and refunds split cumulatively, so any sequence of partial refunds gives back exactly the payment's shares.
 * The database books the payment (`seller_share_micro` in sql/ledger.sql, checked against Postgres in
 * ledger.test.ts); the refund split is TypeScript, checked here for every amount.
 */

const SELLER = 'sel_unit';

function payment(
  amountMicro: bigint,
  escrow: TransactionForRefund['escrow_status'] = 'held',
): TransactionForRefund {
  return {
    id: 'txn_unit',
    seller_id: SELLER,
    payer: '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC',
    chain_id: 31337,
    amount_micro: amountMicro,
    seller_share_micro: splitFee(amountMicro).sellerMicro,
    refunded_micro: 0n,
    refunded_seller_micro: 0n,
    escrow_status: escrow,
  };
}

/** The transaction after `split` is booked (what recordRefund adds to its refunded totals). */
const after = (txn: TransactionForRefund, split: RefundSplit): TransactionForRefund => ({
  ...txn,
  refunded_micro: split.refundedAfter,
  refunded_seller_micro: txn.refunded_seller_micro + split.sellerPart,
});

/** A payment amount and refunds that add up to at most it (the last one, when `full`, takes the rest). */
const paymentAndRefunds = fc
  .record({
    amount: fc.oneof(fc.bigInt({ min: 1n, max: 10_000n }), fc.bigInt({ min: 1n, max: MAX_AMOUNT_MICRO })),
    cuts: fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: 1, maxLength: 12 }),
    full: fc.boolean(),
  })
  .map(({ amount, cuts, full }) => {
    const refunds: bigint[] = [];
    let left = amount;
    for (const cut of cuts) {
      const next = BigInt(Math.floor(cut * Number(left)));
      if (next <= 0n || next > left) continue;
      refunds.push(next);
      left -= next;
    }
    if ((full || refunds.length === 0) && left > 0n) refunds.push(left);
    return { amount, refunds };
  });

describe("a payment's fee split", () => {
  it('gives the seller floor(amount × 95 / 100) and the platform the rest, for every amount', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: MAX_AMOUNT_MICRO }), (amount) => {
        const { sellerMicro, platformMicro } = splitFee(amount);
        expect(sellerMicro).toBe((amount * 95n) / 100n);
        expect(sellerMicro + platformMicro).toBe(amount);
        expect(platformMicro >= 0n && platformMicro <= (amount * 5n) / 100n + 1n).toBe(true);
      }),
      { numRuns: 300 },
    );
  });
});

describe('the cumulative refund split', () => {
  it('splits each refund into parts that add up to it, and partial refunds into exactly the original shares', () => {
    fc.assert(
      fc.property(paymentAndRefunds, ({ amount, refunds }) => {
        let txn = payment(amount);
        let seller = 0n;
        let platform = 0n;
        for (const refund of refunds) {
          const split = splitRefund(txn, refund);
          expect(split.sellerPart + split.platformPart).toBe(refund);
          expect(split.sellerPart >= 0n && split.platformPart >= 0n).toBe(true);
          seller += split.sellerPart;
          platform += split.platformPart;
          // After every refund the seller has borne exactly 95% (rounded down) of all that was refunded.
          expect(seller).toBe((split.refundedAfter * 95n) / 100n);
          txn = after(txn, split);
        }
        const refunded = refunds.reduce((a, b) => a + b, 0n);
        expect(txn.refunded_micro).toBe(refunded);
        if (refunded === amount) {
          expect(seller).toBe(splitFee(amount).sellerMicro);
          expect(platform).toBe(splitFee(amount).platformMicro);
        }
        // Never more than its share: what the seller bore stays within what the payment gave it.
        expect(seller <= splitFee(amount).sellerMicro && platform <= splitFee(amount).platformMicro).toBe(
          true,
        );
      }),
      { numRuns: 300 },
    );
  });

  it('rounds the running total, so the platform never returns more than its fee: 19 refunds of 1 micro of 19 micro', () => {
    let txn = payment(19n);
    const sellerParts: bigint[] = [];
    for (let i = 0; i < 19; i++) {
      const split = splitRefund(txn, 1n);
      sellerParts.push(split.sellerPart);
      txn = after(txn, split);
    }
    // Split refund by refund (floor(1 × 0.95) = 0 each), the platform would have returned all 19.
    // floor(19 × 0.95) = 18 micro borne by the seller in total, 1 by the platform, however it is cut.
    expect(sellerParts.reduce((a, b) => a + b, 0n)).toBe(18n);
    expect(sellerParts.filter((p) => p === 0n)).toHaveLength(1);
  });

  it('comes out of the holds while held, out of available and revenue after release; every entry balances', () => {
    expect(splitRefund(payment(1_000_000n, 'held'), 400_000n)).toEqual({
      amountMicro: 400_000n,
      refundedAfter: 400_000n,
      sellerPart: 380_000n,
      platformPart: 20_000n,
      phase: 'in_escrow',
    });
    for (const status of ['available', 'payout_pending', 'settled'] as const) {
      expect(splitRefund(payment(1_000_000n, status), 1n).phase).toBe('after_release');
    }
    const held = refundEntryLines(SELLER, splitRefund(payment(1_000_000n, 'held'), 400_000n));
    expect(held).toEqual([
      { kind: 'seller_held', owner: SELLER, side: 'debit', amountMicro: 380_000n },
      { kind: 'platform_held', owner: '', side: 'debit', amountMicro: 20_000n },
      { kind: 'refund_pending', owner: '', side: 'credit', amountMicro: 400_000n },
    ]);
    const released = refundEntryLines(SELLER, splitRefund(payment(1_000_000n, 'settled'), 400_000n));
    expect(released.map((l) => `${l.side} ${l.kind}`)).toEqual([
      'debit seller_available',
      'debit platform_revenue',
      'credit refund_pending',
    ]);
    fc.assert(
      fc.property(
        paymentAndRefunds,
        fc.constantFrom('held', 'settled' as const),
        ({ amount, refunds }, status) => {
          const lines = refundEntryLines(SELLER, splitRefund(payment(amount, status), refunds[0]!));
          const total = (side: string) =>
            lines.filter((l) => l.side === side).reduce((sum, l) => sum + l.amountMicro, 0n);
          expect(total('debit')).toBe(total('credit'));
          expect(total('credit')).toBe(refunds[0]);
        },
      ),
    );
  });
});

describe('what may be refunded', () => {
  it('refuses a reversed payment, nothing, and more than remains; all that remains is accepted', () => {
    const txn = { ...payment(1_000_000n), refunded_micro: 250_000n };
    expect(() => assertRefundable({ ...txn, escrow_status: 'reversed' }, 1n)).toThrow(
      expect.objectContaining({ status: 409, code: 'transaction_reversed' }),
    );
    expect(() => assertRefundable(txn, 0n)).toThrow(
      expect.objectContaining({
        status: 400,
        code: 'invalid_request',
        details: expect.objectContaining({ field: 'amount' }),
      }),
    );
    expect(() => assertRefundable(txn, 750_001n)).toThrow(
      expect.objectContaining({
        status: 409,
        code: 'amount_exceeds_refundable',
        details: expect.objectContaining({ field: 'amount', refundable: '0.75' }),
      }),
    );
    expect(() => assertRefundable(txn, 750_000n)).not.toThrow();
  });
});
