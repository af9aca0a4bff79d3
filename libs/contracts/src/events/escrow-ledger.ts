import { Type } from '@sinclair/typebox';
import { Address, Id, IsoTime, UsdcAmount } from '../primitives';

/** SPEC payload (event, transactionId, reason) plus the ids a consumer needs to route it. */
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

/** The ledger has booked a refund; settlement must send `amount` USDC from escrow back to `payer`. */
export const RefundInitiated = Type.Object(
  {
    refundId: Id,
    transactionId: Id,
    sellerId: Id,
    payer: Address,
    amount: UsdcAmount,
    chainId: Type.Integer({ minimum: 1 }),
    initiatedAt: IsoTime,
  },
  { additionalProperties: false },
);
