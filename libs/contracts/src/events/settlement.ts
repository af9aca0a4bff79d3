import { Type } from '@sinclair/typebox';
import { Address, Id, IsoTime, Nullable, TxHash, UsdcAmount } from '../primitives';
import { RefundKind } from './escrow-ledger';

/** The webhook's fields plus routing ids; `kind` as in refund.initiated (no seller is notified without sellerId). */
export const RefundCompleted = Type.Object(
  {
    event: Type.Literal('refund.completed'),
    refundId: Id,
    kind: Type.Optional(RefundKind),
    transactionId: Nullable(Id),
    sellerId: Nullable(Id),
    refundTxHash: TxHash,
    amount: UsdcAmount,
    completedAt: IsoTime,
  },
  { additionalProperties: false },
);

export const SettlementCompleted = Type.Object(
  {
    settlementId: Id,
    sellerId: Id,
    amount: UsdcAmount,
    payoutAddress: Address,
    txHash: TxHash,
    completedAt: IsoTime,
  },
  { additionalProperties: false },
);

/** The platform's fees paid to the treasury, booked by the ledger out of its reservation for `payoutId`. */
export const PlatformPayoutCompleted = Type.Object(
  {
    payoutId: Id,
    amount: UsdcAmount,
    treasuryAddress: Address,
    txHash: TxHash,
    completedAt: IsoTime,
  },
  { additionalProperties: false },
);
