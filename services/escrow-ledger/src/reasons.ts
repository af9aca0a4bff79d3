import type { EventData } from '@paygate/contracts';

/** The ledger's refusals to a caller, by their code (`error.code`); route declarations list them in `errors`. */
export const LedgerReason = {
  // Bad input (400); `field` and `rule` name what is wrong.
  InvalidRequest: 'invalid_request',

  // A seller's refund (404, 409).
  TransactionNotFound: 'transaction_not_found',
  TransactionReversed: 'transaction_reversed',
  AmountExceedsRefundable: 'amount_exceeds_refundable',
  TooManyPartialRefunds: 'too_many_partial_refunds',
  InsufficientSellerBalance: 'insufficient_seller_balance',
  InsufficientPlatformRevenue: 'insufficient_platform_revenue',
  NothingRefundable: 'nothing_refundable',

  // A buyer's refund request (403, 409).
  NotPayer: 'not_payer',
  RefundRequestReplayed: 'refund_request_replayed',
  RefundRequestPending: 'refund_request_pending',
  RefundRequestNotPending: 'refund_request_not_pending',

  // The operator's reconciliation (503).
  ChainUnavailable: 'chain_unavailable',
} as const;

export type LedgerReason = (typeof LedgerReason)[keyof typeof LedgerReason];

/** Why a payout was refused (`payout.refused`): nothing booked, decided again on the next due of the same id. */
export const PayoutRefusal = {
  NothingAvailable: 'nothing_available',
  BelowMinimum: 'below_minimum',
} as const satisfies Record<string, EventData<'payout.refused'>['reason']>;

export type PayoutRefusal = (typeof PayoutRefusal)[keyof typeof PayoutRefusal];

/** Why an unserved call was not refunded (`unserved_calls.decision`, the lookup's refundReason). */
export const UnservedDecision = {
  ServedOnRetry: 'served_on_retry',
  NoSellerFailure: 'no_seller_failure',
  PaymentNotBooked: 'payment_not_booked',
  AlreadyRefunded: 'already_refunded',
} as const;

export type UnservedDecision = (typeof UnservedDecision)[keyof typeof UnservedDecision];
