import { Type } from '@sinclair/typebox';
import { IsoTime, Nullable, StringEnum, TxHash, UsdcAmount } from '../http/schemas';

const TransactionId = Type.String({
  minLength: 1,
  maxLength: 64,
  description: 'the transaction to refund (txn_…)',
  examples: ['txn_01KAQ3T0000X7Q0E4W9T6B2M8C'],
});
const Reason = Type.String({ minLength: 1, maxLength: 500 });
const AmountIn = Type.String({
  minLength: 1,
  maxLength: 40,
  description: 'decimal USDC amount, more than 0, at most 6 decimals, at most what remains refundable',
  examples: ['4'],
});

export const RefundBody = Type.Object(
  { transactionId: TransactionId, amount: AmountIn, reason: Reason },
  { additionalProperties: false },
);

const SessionId = Type.String({
  minLength: 1,
  maxLength: 64,
  description: 'the checkout session the payment paid (cs_…)',
});
const LogIndex = Type.Integer({
  minimum: 0,
  description: 'the Transfer log of txHash, when one transaction made several payments into escrow',
});

export const RefundRequestBody = Type.Object(
  {
    transactionId: Type.Optional(TransactionId),
    txHash: Type.Optional({ ...TxHash, description: 'the on-chain transfer that paid (what a buyer knows)' }),
    logIndex: Type.Optional(LogIndex),
    sessionId: Type.Optional(SessionId),
    reason: Reason,
    // Required (checked after the payment is named, so a body naming none is told that first).
    chainId: Type.Optional(
      Type.Integer({ minimum: 1, description: 'required: the chain the payment was made on (signed)' }),
    ),
    nonce: Type.Optional(
      Type.String({
        pattern: '^[0-9a-f]{32}$',
        'x-rule': 'must be 32 lowercase hex characters (128 random bits)',
        description: 'required: random, per request (signed)',
      }),
    ),
    expiresAt: Type.Optional(
      Type.String({
        format: 'date-time',
        maxLength: 40,
        description: 'required: the signed request is refused after this (at most 24 hours ahead; signed)',
      }),
    ),
    signature: Type.String({
      pattern: '^0x[0-9a-fA-F]{130}$',
      'x-rule': 'must be a 0x-prefixed 65-byte hex signature',
      description:
        'EIP-191 personal_sign signature by the payer wallet of the refund request message (see the route description; @paygate/agent-client refundRequestMessage builds it)',
    }),
  },
  {
    additionalProperties: false,
    description:
      'exactly one of transactionId, txHash (optionally with logIndex) or sessionId names the payment',
  },
);

export const TransactionLookupQuery = Type.Object(
  {
    sessionId: Type.Optional(SessionId),
    txHash: Type.Optional(TxHash),
    logIndex: Type.Optional(
      Type.String({ pattern: '^[0-9]{1,6}$', 'x-rule': 'must be a log index (0 or more)' }),
    ),
  },
  {
    additionalProperties: false,
    description: 'exactly one of sessionId or txHash (optionally with logIndex)',
  },
);

export const TransactionLookup = Type.Object({
  transactionId: Type.String(),
  sessionId: Nullable(Type.String()),
  txHash: TxHash,
  logIndex: Type.Integer({ minimum: 0 }),
  amount: UsdcAmount,
  refundableAmount: { ...UsdcAmount, description: 'what a refund could still give back' },
  outcome: Type.Union(
    ['served', 'retryable', 'unserved', 'refund_pending', 'refunded', 'not_refunded'].map((v) =>
      Type.Literal(v),
    ),
    {
      description:
        'what became of the paid call: served (answered below 500, at once or on a retry; every payment that is not a forwarded call), retryable (the seller failed it: present the same payment again until retryUntil), unserved (its window closed unserved: the refund is being decided), refund_pending (refunded on the books, the transfer back not on chain yet), refunded (on chain, refundTxHash), not_refunded (closed without a seller failure, or nothing remained refundable: refundReason)',
    },
  ),
  retryUntil: Nullable(IsoTime),
  refundId: Nullable(Type.String()),
  refundTxHash: Nullable(TxHash),
  refundedAt: Nullable(IsoTime),
  refundReason: Nullable(Type.String()),
});

export const ApproveBody = Type.Object(
  {
    amount: Type.Optional({
      ...AmountIn,
      description: 'decimal USDC amount to refund; default: everything that remains refundable',
    }),
  },
  { additionalProperties: false },
);

export const RejectBody = Type.Object(
  { reason: Type.Optional({ ...Reason, description: 'why the merchant declined (decisionReason)' }) },
  { additionalProperties: false },
);

export const REFUND_REQUEST_STATUSES = ['pending', 'approved', 'rejected', 'completed'] as const;
export const RefundRequestListQuery = Type.Object({
  status: Type.Optional(StringEnum(REFUND_REQUEST_STATUSES, 'only requests in this state')),
});

export const Refund = Type.Object({
  refundId: Type.String({ examples: ['rfd_01KAQ3T0000X7Q0E4W9T6B2M8C'] }),
  transactionId: Type.String(),
  amount: { ...UsdcAmount, description: 'USDC sent back to the payer' },
  sellerAmount: {
    ...UsdcAmount,
    description: 'part borne by the seller (95% of the refund, cumulative floor)',
  },
  platformFeeReturned: { ...UsdcAmount, description: 'platform fee given back (the rest, 5%)' },
  phase: StringEnum(
    ['in_escrow', 'after_release'],
    'in_escrow: taken from the holds (instant); after_release: debited from the seller balance (may go negative: owed)',
  ),
  status: StringEnum(
    ['pending', 'completed', 'failed'],
    'pending: booked, refund.initiated sent; completed: the transfer back is on chain (refundTxHash); failed: reserved',
  ),
  reason: Type.String(),
  refundRequestId: Nullable(Type.String({ description: 'the buyer request it answers, if any' })),
  refundTxHash: Nullable({ ...TxHash, description: 'the USDC transfer back to the payer, once completed' }),
  createdAt: IsoTime,
  completedAt: Nullable(IsoTime),
});

export const RefundCreated = Type.Intersect([
  Refund,
  Type.Object({
    remainingRefundable: { ...UsdcAmount, description: 'what can still be refunded afterwards' },
  }),
]);

export const RefundRequest = Type.Object({
  id: Type.String({
    description: 'the request id (same as refundRequestId): GET /api/v1/refund-requests/{id}',
    examples: ['rrq_01KAQ3T0000X7Q0E4W9T6B2M8C'],
  }),
  refundRequestId: Type.String({ examples: ['rrq_01KAQ3T0000X7Q0E4W9T6B2M8C'] }),
  transactionId: Type.String(),
  reason: Type.String(),
  status: StringEnum(
    REFUND_REQUEST_STATUSES,
    'pending -> approved (a refund is booked) -> completed (its refund is on chain), or pending -> rejected',
  ),
  refundId: Nullable(Type.String({ description: 'the refund booked on approval' })),
  decisionReason: Nullable(Type.String({ description: 'the reason given on rejection' })),
  refund: Nullable(
    Type.Object({
      status: StringEnum(['pending', 'completed', 'failed'], 'completed: the USDC is back on chain'),
      amount: UsdcAmount,
      refundTxHash: Nullable(TxHash),
    }),
  ),
  createdAt: IsoTime,
  decidedAt: Nullable(IsoTime),
  completedAt: Nullable(IsoTime),
});

export const RefundRequestApproved = Type.Intersect([RefundRequest, Type.Object({ refund: Refund })]);
export const RefundRequestList = Type.Object({
  data: Type.Array(RefundRequest, { description: 'newest first, at most 100' }),
});
