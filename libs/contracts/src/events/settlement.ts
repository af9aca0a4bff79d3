import { Type } from '@sinclair/typebox';
import { Address, ClosedObject, Id, IsoTime, Nullable, TxHash, UsdcAmount } from '../primitives';
import { RefundKind } from './escrow-ledger';

/** The webhook's fields plus routing ids; `kind` as in refund.initiated (no seller is notified without sellerId). */
export const RefundCompleted = ClosedObject({
  event: Type.Literal('refund.completed'),
  refundId: Id,
  kind: Type.Optional(RefundKind),
  transactionId: Nullable(Id),
  sellerId: Nullable(Id),
  refundTxHash: TxHash,
  amount: UsdcAmount,
  completedAt: IsoTime,
});

export const SettlementCompleted = ClosedObject({
  settlementId: Id,
  sellerId: Id,
  amount: UsdcAmount,
  payoutAddress: Address,
  txHash: TxHash,
  completedAt: IsoTime,
});

/** The platform's fees paid to the treasury, booked by the ledger out of its reservation for `payoutId`. */
export const PlatformPayoutCompleted = ClosedObject({
  payoutId: Id,
  amount: UsdcAmount,
  treasuryAddress: Address,
  txHash: TxHash,
  completedAt: IsoTime,
});
