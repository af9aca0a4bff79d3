import { formatUsdc, parseUsdc, splitFee } from '@paygate/money';

/** The fields of a transaction a refund's effect depends on (GET /api/v1/transactions/{id}). */
interface RefundableTransaction {
  amount: string;
  refundedAmount: string;
  refundableAmount: string;
  /** Where the money sits: held, available, settling, settled. */
  escrowStatus: string;
}

type Balance = 'held' | 'available' | 'owed';

/**
 * The effect of refunding `amount` of a payment, computed as the ledger books it: the split is cumulative, the
 * seller bears floor(95% of everything refunded) minus what it already bore; the fee's part goes back with it.
 */
export function refundEffect(transaction: RefundableTransaction, amount: string) {
  const paid = parseUsdc(transaction.amount);
  const refundedBefore = parseUsdc(transaction.refundedAmount);
  const refunding = parseUsdc(amount);
  const refundedAfter = refundedBefore + refunding;
  if (refundedAfter > paid) throw new RangeError('the refund is larger than what remains refundable');
  const fromSeller = splitFee(refundedAfter).sellerMicro - splitFee(refundedBefore).sellerMicro;
  return {
    fromSeller: formatUsdc(fromSeller),
    feeReturned: formatUsdc(refunding - fromSeller),
    sellerKeeps: formatUsdc(splitFee(paid).sellerMicro - splitFee(refundedAfter).sellerMicro),
    balance: balanceOf(transaction.escrowStatus),
  };
}

/** What the seller gets of a payment after its refunds ("You get"). */
export function sellerNet(transaction: { amount: string; refundedAmount: string }): string {
  const paid = parseUsdc(transaction.amount);
  const refunded = parseUsdc(transaction.refundedAmount);
  return formatUsdc(splitFee(paid).sellerMicro - splitFee(refunded).sellerMicro);
}

function balanceOf(escrowStatus: string): Balance {
  if (escrowStatus === 'held') return 'held';
  if (escrowStatus === 'available') return 'available';
  return 'owed';
}

export const BALANCE_EFFECT: Record<Balance, string> = {
  held: 'comes out of your held balance (the payment is still in escrow)',
  available: 'comes out of your available balance',
  owed: 'is already paid out to you, so it is owed and taken from your next payouts',
};
