import { Type } from '@sinclair/typebox';
import { Address, Id, IsoTime, Nullable, TxHash, UsdcAmount } from '../primitives';

/** The webhook's documented fields (event, transactionId, reason) plus the ids a consumer needs to route it. */
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

/** A hold has passed its hold period: the seller's share is now available for settlement. */
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
 * What a refund gives back: (part of) a seller's payment, a transfer into escrow that no payment claimed, or a
 * payer's refunds of paid calls their sellers did not serve, sent as one transfer (`unserved_batch`: no transaction,
 * no seller; each call's refund is booked against its own payment, and the seller told by payment.refunded).
 */
export const RefundKind = Type.Union([
  Type.Literal('payment'),
  Type.Literal('unmatched_transfer'),
  Type.Literal('unserved_batch'),
]);

/**
 * The ledger has booked a refund; settlement must send `amount` USDC from escrow back to `payer`.
 * `kind` absent means `payment` (events published before it existed). A payment refund has `transactionId` and
 * `sellerId`; an `unmatched_transfer` refund has neither (null) and names the transfer it returns in `transfer`; an
 * `unserved_batch` has neither either.
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
 * The ledger refunded a paid call its seller did not serve (its retry window closed after a 5xx, a timeout or no
 * connection, with no attempt served), without the seller's approval: the payment's money goes back to the payer
 * (`refundId`; the transfer is sent once the payer's unserved refunds reach the ledger's threshold, or at its
 * bounded age). The seller hears of it by webhook.
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
    /** How the seller failed the last time: error_status (with upstreamStatus), timeout, unreachable, misconfigured. */
    upstreamOutcome: Type.String(),
    upstreamStatus: Nullable(Type.Integer({ minimum: 500, maximum: 599 })),
    /** The payment's transfer into escrow. */
    txHash: TxHash,
    refundedAt: IsoTime,
  },
  { additionalProperties: false },
);
