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

/** What a refund gives back: (part of) a seller's payment, or a transfer into escrow that no payment claimed. */
export const RefundKind = Type.Union([Type.Literal('payment'), Type.Literal('unmatched_transfer')]);

/**
 * The ledger has booked a refund; settlement must send `amount` USDC from escrow back to `payer`.
 * `kind` absent means `payment` (events published before it existed). A payment refund has `transactionId` and
 * `sellerId`; an `unmatched_transfer` refund has neither (null) and names the transfer it returns in `transfer`.
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
