import { Type } from '@sinclair/typebox';
import { Address, Id, IsoTime, Literals, Nullable, TxHash, UsdcAmount } from '../primitives';

/** The webhook's fields plus the ids a consumer needs to route it. */
export const RefundRequested = Type.Object(
  {
    event: Type.Literal('refund.requested'),
    refundRequestId: Id,
    transactionId: Id,
    sellerId: Id,
    reason: Type.String(),
    requestedAt: IsoTime,
  },
  { additionalProperties: false },
);

export const EscrowReleased = Type.Object(
  {
    transactionId: Id,
    sellerId: Id,
    amount: UsdcAmount,
    releasedAt: IsoTime,
  },
  { additionalProperties: false },
);

export const RefundApproved = Type.Object(
  {
    refundRequestId: Id,
    refundId: Id,
    transactionId: Id,
    sellerId: Id,
    amount: UsdcAmount,
    approvedAt: IsoTime,
  },
  { additionalProperties: false },
);

/**
 * What a refund gives back: (part of) a payment, an unclaimed transfer, or one transfer for a payer's unserved calls
 * (`unserved_batch`: each call's refund is booked against its own payment).
 */
export const RefundKind = Literals(['payment', 'unmatched_transfer', 'unserved_batch']);

/**
 * The ledger has booked a refund; settlement must send `amount` USDC from escrow back to `payer`. `kind` absent
 * means `payment`, the only kind with `transactionId` and `sellerId`; `unmatched_transfer` names its `transfer`.
 */
export const RefundInitiated = Type.Object(
  {
    refundId: Id,
    kind: Type.Optional(RefundKind),
    transactionId: Nullable(Id),
    sellerId: Nullable(Id),
    transfer: Type.Optional(
      Type.Object(
        { txHash: TxHash, logIndex: Type.Integer({ minimum: 0 }) },
        { additionalProperties: false },
      ),
    ),
    payer: Address,
    amount: UsdcAmount,
    chainId: Type.Integer({ minimum: 1 }),
    initiatedAt: IsoTime,
  },
  { additionalProperties: false },
);

/**
 * The ledger refunded a paid call its seller did not serve, without the seller's approval; the transfer goes out
 * once the payer's unserved refunds reach the ledger's threshold, or at its bounded age.
 */
export const PaymentRefunded = Type.Object(
  {
    refundId: Id,
    transactionId: Id,
    paymentId: Id,
    sellerId: Id,
    payer: Address,
    amount: UsdcAmount,
    reason: Type.Literal('unserved'),
    /** How the seller failed the last time (payment.call_failed's upstreamOutcome). */
    upstreamOutcome: Type.String(),
    upstreamStatus: Nullable(Type.Integer({ minimum: 500, maximum: 599 })),
    txHash: TxHash,
    refundedAt: IsoTime,
  },
  { additionalProperties: false },
);
