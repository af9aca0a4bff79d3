import { Type } from '@sinclair/typebox';
import { Address, ClosedObject, Id, IsoTime, Literals, Nullable, TxHash, UsdcAmount } from '../primitives';

/** The webhook's fields plus the ids a consumer needs to route it. */
export const RefundRequested = ClosedObject({
  event: Type.Literal('refund.requested'),
  refundRequestId: Id,
  transactionId: Id,
  sellerId: Id,
  reason: Type.String(),
  requestedAt: IsoTime,
});

export const EscrowReleased = ClosedObject({
  transactionId: Id,
  sellerId: Id,
  amount: UsdcAmount,
  releasedAt: IsoTime,
});

export const RefundApproved = ClosedObject({
  refundRequestId: Id,
  refundId: Id,
  transactionId: Id,
  sellerId: Id,
  amount: UsdcAmount,
  approvedAt: IsoTime,
});

/** `unserved_batch`: one transfer for a payer's unserved calls, each refund booked against its payment. */
export const RefundKind = Literals(['payment', 'unmatched_transfer', 'unserved_batch']);

/**
 * The ledger has booked a refund; settlement must send `amount` USDC from escrow back to `payer`. `kind` absent
 * means `payment`, the only kind with `transactionId` and `sellerId`; `unmatched_transfer` names its `transfer`.
 */
export const RefundInitiated = ClosedObject({
  refundId: Id,
  kind: Type.Optional(RefundKind),
  transactionId: Nullable(Id),
  sellerId: Nullable(Id),
  transfer: Type.Optional(ClosedObject({ txHash: TxHash, logIndex: Type.Integer({ minimum: 0 }) })),
  payer: Address,
  amount: UsdcAmount,
  chainId: Type.Integer({ minimum: 1 }),
  initiatedAt: IsoTime,
});

/** An unserved paid call refunded without approval, sent in the payer's batch (at its threshold or age). */
export const PaymentRefunded = ClosedObject({
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
});
