import { type Static, Type } from '@sinclair/typebox';
import { PaymentFields } from '../events/payments';
import { Address, ClosedObject, Id, IsoTime, Literals, NetworkName, TxHash, UsdcAmount } from '../primitives';

/** The payment paths that may claim (spend on one thing) an on-chain transfer. */
export const ClaimedVia = Literals(['x402', 'verify', 'checkout', 'operator_refund']);
export type ClaimedVia = Static<typeof ClaimedVia>;

/**
 * What a claim pays for, booked in the claim's own transaction: the amount from suspense into the seller's hold
 * (95%) and the platform's (5%), and `payment.confirmed` through the ledger's outbox.
 */
export const PaymentToBook = ClosedObject({
  ...PaymentFields,
  network: NetworkName,
  token: Address,
  holdPeriodHours: Type.Integer({ minimum: 0, maximum: 168 }),
});

/**
 * `ledger.claim_transfer`: the first claim of a transfer (chainId, txHash, logIndex) wins, on every replica (a
 * unique row), in one transaction with its payment's booking. A repeat with the same `claimedVia` and reference is
 * answered ok with the first booking, never booking again; any other claim is refused with who holds it.
 */
export const ClaimTransferRequest = ClosedObject({
  chainId: Type.Integer({ minimum: 1 }),
  txHash: TxHash,
  logIndex: Type.Integer({ minimum: 0 }),
  claimedVia: ClaimedVia,
  /** What the transfer pays for in the payment path's terms (`<network>:<txHash>`, a session or transfer id). */
  reference: Type.String({ minLength: 1, maxLength: 160 }),
  /** As the claimant saw them on chain. */
  payer: Address,
  amount: UsdcAmount,
  /**
   * `operator_refund` only: the underpaid session whose paymentless claim the refund takes over (refused as
   * `claimed_elsewhere` when a payment of the transfer is booked).
   */
  underpaidSessionId: Type.Optional(Id),
  /** Absent for a claim that books nothing: an operator refund, an underpaid checkout session. */
  payment: Type.Optional(PaymentToBook),
});

/**
 * Whether a claim may take over the one holding a transfer: only an operator refund naming the underpaid session
 * that holds it (the caller still refuses when a payment is booked). Shared by the ledger and the tests' responder.
 */
export function refundTakesOverClaim(
  held: { claimedVia: string; reference: string },
  request: { claimedVia: string; underpaidSessionId?: string },
): boolean {
  return (
    request.claimedVia === 'operator_refund' &&
    request.underpaidSessionId !== undefined &&
    held.claimedVia === 'checkout' &&
    held.reference === request.underpaidSessionId
  );
}

export const ClaimTransferReply = Type.Union([
  ClosedObject({
    ok: Type.Literal(true),
    claimId: Id,
    /** false on an idempotent repeat. */
    fresh: Type.Boolean(),
    claimedAt: IsoTime,
    /**
     * The payment booked with the claim (the first request's) and its transaction; the transaction is absent
     * while the payment is parked (reorged away) or refused as a conflict for an operator.
     */
    paymentId: Type.Optional(Id),
    transactionId: Type.Optional(Id),
  }),
  ClosedObject({
    ok: Type.Literal(false),
    reason: Type.Literal('claimed_elsewhere'),
    message: Type.String(),
    claimedBy: ClosedObject({ claimedVia: ClaimedVia, claimedAt: IsoTime }),
  }),
  ClosedObject({
    ok: Type.Literal(false),
    /** Operator refunds only: the ledger's books differ from the request. */
    reason: Literals(['transfer_reorged', 'amount_differs', 'payer_differs']),
    message: Type.String(),
    booked: ClosedObject({ from: Address, amount: UsdcAmount }),
  }),
  ClosedObject({
    ok: Type.Literal(false),
    reason: Literals(['invalid_request', 'internal_error']),
    message: Type.String(),
  }),
]);
