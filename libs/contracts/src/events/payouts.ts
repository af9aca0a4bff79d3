import { Type } from '@sinclair/typebox';
import { Address, Id, IsoTime, Nullable, SignedUsdcAmount, UsdcAmount } from '../primitives';

/**
 * The one path of money out of escrow to a seller or the treasury: settlement says a payout is due
 * (`settlement.due`, `revenue.payout_requested`), the ledger decides it in one transaction of its own
 * (`payout.reserved` or `payout.refused`), settlement sends exactly what the reservation names and reports the
 * end (`settlement.completed` / `revenue.paid_out`, or `payout.failed`, the only way a reservation is given back).
 */
export const PayoutKind = Type.Union([Type.Literal('seller'), Type.Literal('platform')]);

/** A seller's period is due (the scheduler) or an operator asked to settle it now: the ledger decides its payout. */
export const SettlementDue = Type.Object(
  {
    /** Deterministic per (seller, period): asked again after a refusal under the same id. */
    settlementId: Id,
    sellerId: Id,
    /** Reserve nothing unless at least this much is available (the seller's minimum settlement). */
    minimumAmount: UsdcAmount,
    dueAt: IsoTime,
  },
  { additionalProperties: false },
);

/** An operator asked for the platform's revenue to be paid to the treasury address. */
export const PlatformPayoutRequested = Type.Object(
  { payoutId: Id, treasuryAddress: Address, requestedAt: IsoTime },
  { additionalProperties: false },
);

/**
 * The ledger moved `amount` to payout-pending for `payoutId` (a settlementId, or a platform payoutId): settlement
 * sends exactly this amount to exactly `payoutAddress` (the seller's payout address in the ledger's own view, or
 * the treasury address the request named), once.
 */
export const PayoutReserved = Type.Object(
  {
    payoutId: Id,
    kind: PayoutKind,
    /** null for a platform payout. */
    sellerId: Nullable(Id),
    amount: UsdcAmount,
    payoutAddress: Address,
    reservedAt: IsoTime,
  },
  { additionalProperties: false },
);

/** The ledger reserved nothing for `payoutId`: the money (if any) waits for a later payout. */
export const PayoutRefused = Type.Object(
  {
    payoutId: Id,
    kind: PayoutKind,
    sellerId: Nullable(Id),
    reason: Type.Union([Type.Literal('below_minimum'), Type.Literal('nothing_available')]),
    /** What the seller (or the platform revenue) held; may be negative: refunds after a payout are owed. */
    available: SignedUsdcAmount,
    refusedAt: IsoTime,
  },
  { additionalProperties: false },
);

/**
 * Settlement gave a reserved payout up: never signed (pre-flight or the per-transfer cap), or its transaction
 * reverted. Nothing left escrow; the ledger gives the reservation back to the seller's (or the platform's) balance.
 */
export const PayoutFailed = Type.Object(
  {
    payoutId: Id,
    kind: PayoutKind,
    sellerId: Nullable(Id),
    amount: UsdcAmount,
    reason: Type.String({ maxLength: 600 }),
    failedAt: IsoTime,
  },
  { additionalProperties: false },
);
