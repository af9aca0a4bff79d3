import { Type } from '@sinclair/typebox';
import {
  Address,
  ClosedObject,
  Id,
  IsoTime,
  Literals,
  Nullable,
  SignedUsdcAmount,
  UsdcAmount,
} from '../primitives';

/** Due, reserved (or refused) by the ledger, sent once by settlement; only `payout.failed` gives it back. */
export const PayoutKind = Literals(['seller', 'platform']);

export const SettlementDue = ClosedObject({
  /** Deterministic per (seller, period): asked again after a refusal under the same id. */
  settlementId: Id,
  sellerId: Id,
  /** Reserve nothing unless at least this much is available. */
  minimumAmount: UsdcAmount,
  dueAt: IsoTime,
});

export const PlatformPayoutRequested = ClosedObject({
  payoutId: Id,
  treasuryAddress: Address,
  requestedAt: IsoTime,
});

/** Settlement sends exactly `amount` to exactly `payoutAddress` (in the ledger's own view), once. */
export const PayoutReserved = ClosedObject({
  payoutId: Id,
  kind: PayoutKind,
  /** null for a platform payout. */
  sellerId: Nullable(Id),
  amount: UsdcAmount,
  payoutAddress: Address,
  reservedAt: IsoTime,
});

export const PayoutRefused = ClosedObject({
  payoutId: Id,
  kind: PayoutKind,
  sellerId: Nullable(Id),
  reason: Literals(['below_minimum', 'nothing_available']),
  /** What the seller (or the platform revenue) held; may be negative: refunds after a payout are owed. */
  available: SignedUsdcAmount,
  refusedAt: IsoTime,
});

/** A reserved payout was never signed or reverted: nothing left escrow, the ledger gives the reservation back. */
export const PayoutFailed = ClosedObject({
  payoutId: Id,
  kind: PayoutKind,
  sellerId: Nullable(Id),
  amount: UsdcAmount,
  reason: Type.String({ maxLength: 600 }),
  failedAt: IsoTime,
});
