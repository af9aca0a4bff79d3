import { Type } from '@sinclair/typebox';
import { Address, Id, IsoTime, TxHash, UsdcAmount } from '../primitives';

/** SPEC payload (event, transactionId, refundTxHash, amount) plus routing ids. */
export const RefundCompleted = Type.Object(
  {
    event: Type.Literal('refund.completed'),
    refundId: Id,
    transactionId: Id,
    sellerId: Id,
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
