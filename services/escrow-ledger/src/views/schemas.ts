import { Type } from '@sinclair/typebox';
import { IsoTime, Nullable, StringEnum, TransactionIdPattern, TxHash, UsdcAmount } from '../http/schemas';
import { Refund } from '../refunds/schemas';

export const TRANSACTION_STATUSES = [
  'held',
  'available',
  'settling',
  'settled',
  'refunded',
  'partially_refunded',
  'reversed',
] as const;

const DateOrTime = (description: string) =>
  Type.String({
    pattern: '^[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2}(:[0-9]{2}(\\.[0-9]{1,3})?)?Z)?$',
    'x-rule': 'must be an ISO date (2026-11-22) or UTC date-time (2026-11-22T10:00:00Z)',
    description,
  });

export const TransactionListQuery = Type.Object({
  status: Type.Optional(StringEnum(TRANSACTION_STATUSES, 'only transactions with this status')),
  limit: Type.Optional(
    Type.String({
      pattern: '^(200|1[0-9]{2}|[1-9][0-9]?)$',
      'x-rule': 'must be an integer from 1 to 200',
      description: 'page size, 1 to 200 (default 50)',
      examples: ['50'],
    }),
  ),
  cursor: Type.Optional(
    Type.String({
      pattern: TransactionIdPattern,
      'x-rule': 'must be a transactionId from nextCursor',
      description: 'nextCursor of the previous page',
    }),
  ),
  confirmedFrom: Type.Optional(
    DateOrTime('only transactions confirmed at or after this time (a date means its 00:00 UTC)'),
  ),
  confirmedBefore: Type.Optional(
    DateOrTime('only transactions confirmed before this time (exclusive; a date means its 00:00 UTC)'),
  ),
  skill: Type.Optional(
    Type.String({
      pattern: '^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$',
      'x-rule': 'must be a skill name (kebab-case)',
      description: "only payments for this skill (the skill's name)",
    }),
  ),
  txHash: Type.Optional(
    Type.String({
      pattern: '^0x[0-9a-fA-F]{64}$',
      'x-rule': 'must be a 0x-prefixed 32-byte hex transaction hash',
      description: 'only the payment made by this on-chain transaction',
    }),
  ),
});

export const Transaction = Type.Object({
  transactionId: Type.String({ examples: ['txn_01KAQ3T0000X7Q0E4W9T6B2M8C'] }),
  status: StringEnum(
    TRANSACTION_STATUSES,
    'held -> available (hold period passed) -> settling (in a payout) -> settled; refunded / partially_refunded once refunds exist; reversed when its transfer was reorged away',
  ),
  escrowStatus: StringEnum(
    ['held', 'available', 'settling', 'settled', 'reversed'],
    'where the money sits, whatever was refunded',
  ),
  amount: { ...UsdcAmount, description: 'what the buyer paid' },
  sellerAmount: { ...UsdcAmount, description: "seller's share: floor(amount x 95%)" },
  platformFee: { ...UsdcAmount, description: 'platform fee: amount - sellerAmount (5%)' },
  refundedAmount: UsdcAmount,
  refundableAmount: { ...UsdcAmount, description: 'amount - refundedAmount (0 when reversed)' },
  payer: Type.String({ description: 'the wallet that paid' }),
  source: Type.String({ description: 'x402 (gateway) or checkout' }),
  paymentId: Type.String(),
  skillId: Nullable(Type.String()),
  skillName: Nullable(Type.String()),
  sessionId: Nullable(Type.String({ description: 'the checkout session, for checkout payments' })),
  network: Type.String({ examples: ['base'] }),
  chainId: Type.Integer({ examples: [8453] }),
  txHash: TxHash,
  logIndex: Type.Integer({ minimum: 0 }),
  holdPeriodHours: Type.Integer({ minimum: 0, maximum: 168 }),
  holdUntil: IsoTime,
  settlementId: Nullable(Type.String()),
  confirmedAt: IsoTime,
  releasedAt: Nullable(IsoTime),
  settledAt: Nullable(IsoTime),
  reversedAt: Nullable(IsoTime),
  createdAt: IsoTime,
  callStatus: StringEnum(
    ['served', 'failed_retryable', 'failed'],
    'what became of the paid call: served (at once, or by a retry after a failure); failed_retryable (the seller failed it: 5xx, timeout, unreachable; the buyer may retry with the same payment until retryUntil); failed (the window passed with no retry served). Payments that are not a forwarded call (checkout, tickets) are served',
  ),
  callFailedAt: Nullable({
    ...IsoTime,
    description: "when the seller's latest failure of this call happened",
  }),
  upstreamOutcome: Nullable(
    StringEnum(
      ['error_status', 'timeout', 'unreachable', 'misconfigured'],
      "how the seller failed: a 5xx answer (upstreamStatus), no answer in time, no connection, or the skill's apiBaseUrl is not an http(s) URL",
    ),
  ),
  upstreamStatus: Nullable(
    Type.Integer({ minimum: 500, maximum: 599, description: "the seller's 5xx status (error_status only)" }),
  ),
  retryUntil: Nullable({
    ...IsoTime,
    description: 'the end of the retry window the buyer was given (set once the seller failed the call)',
  }),
  callRecoveredAt: Nullable({ ...IsoTime, description: 'when a retry after the failure was served' }),
});

export const TransactionList = Type.Object({
  data: Type.Array(Transaction, { description: 'newest first' }),
  nextCursor: Nullable(
    Type.String({ description: 'pass as cursor for the next page; null on the last page' }),
  ),
});

export const TransactionDetail = Type.Intersect([
  Transaction,
  Type.Object({
    history: Type.Array(
      Type.Object({
        type: Type.String({
          description:
            'payment_held | released | refund_booked | refund_sent | payment_reversed | settled (journal entries of the transaction)',
        }),
        amount: UsdcAmount,
        at: IsoTime,
        refundId: Type.Optional(Type.String()),
      }),
    ),
    refunds: Type.Array(Refund),
  }),
]);

export const Balances = Type.Object({
  sellerId: Type.String(),
  currency: Type.Literal('USDC'),
  held: { ...UsdcAmount, description: 'seller share of payments still in their hold period' },
  available: { ...UsdcAmount, description: 'released, not yet paid out (0 when the seller owes)' },
  settling: { ...UsdcAmount, description: 'reserved for a payout being sent' },
  settled: { ...UsdcAmount, description: 'paid out in completed settlements, in total' },
  owed: {
    ...UsdcAmount,
    description: 'what the seller owes after refunds of settled money; recovered from later settlements',
  },
});
