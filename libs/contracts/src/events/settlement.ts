import { Type } from '@sinclair/typebox';
import { Address, Id, IsoTime, Nullable, TxHash, UsdcAmount } from '../primitives';
import { RefundKind } from './escrow-ledger';

/**
 * The webhook's documented fields (event, transactionId, refundTxHash, amount) plus routing ids. `kind` as in refund.initiated
 * (absent = payment); a refund of an unmatched transfer has no transaction and no seller (both null), so no
 * seller is notified of it.
 */
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

/**
 * The platform's revenue (its 5% fees) was paid out of escrow to the treasury address, confirmed on chain. The
 * ledger books it out of the reservation it made for `payoutId` (`ledger.reserve_platform_payout`).
 */
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
