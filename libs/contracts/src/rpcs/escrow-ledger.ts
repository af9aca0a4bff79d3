import { Type } from '@sinclair/typebox';
import { ClaimedVia, TransferClaimFields } from '../events/claims';
import { PaymentSource } from '../events/payments';
import { Address, Id, IsoTime, NetworkName, Nullable, UsdcAmount } from '../primitives';

/**
 * What a claim pays for, booked by the ledger in the claim's own transaction: the transfer's amount from suspense
 * into the seller's hold (95%) and the platform's (5%), and `payment.confirmed` (these fields with the claim's
 * chainId, txHash, logIndex, payer, amount and the ledger's confirmedAt) published through the ledger's outbox.
 */
export const PaymentToBook = Type.Object(
  {
    /** The payment's id, the same on every repeat of the claim (the gateway derives it from `network:txHash`). */
    paymentId: Id,
    source: PaymentSource,
    sellerId: Id,
    skillId: Nullable(Id),
    skillName: Nullable(Type.String()),
    endpointId: Nullable(Id),
    sessionId: Nullable(Id),
    network: NetworkName,
    token: Address,
    holdPeriodHours: Type.Integer({ minimum: 0, maximum: 168 }),
  },
  { additionalProperties: false },
);

/**
 * `ledger.claim_transfer`: spend an on-chain transfer on one thing, and book what it pays for. The first claim of a
 * transfer (chainId, txHash, logIndex) wins, whatever path claims it and on every replica (a unique row in the
 * ledger); with a `payment`, the claim, the payment's booking and its `payment.confirmed` are one ledger
 * transaction, answered once. A repeated claim with the same payment path (`claimedVia`) and reference is answered
 * ok again with the payment booked the first time, never booking again (retries, a subscription's re-use, a
 * redelivered event, two replicas asking at once); any other is refused with who holds it.
 */
export const ClaimTransferRequest = Type.Object(
  {
    ...TransferClaimFields,
    /**
     * `claimedVia: 'operator_refund'` only: the underpaid checkout session whose claim (`checkout`, this session
     * id) holds the transfer without a payment. The refund takes that claim over, unless a payment of the
     * transfer is booked (then it is refused as `claimed_elsewhere`, as any refund of a paid transfer is).
     */
    underpaidSessionId: Type.Optional(Id),
    /**
     * The payment to book with the claim (x402, verify, a paid checkout session). Absent for a claim that pays for
     * nothing the ledger books: an operator refund, an underpaid checkout session.
     */
    payment: Type.Optional(PaymentToBook),
  },
  { additionalProperties: false },
);

/**
 * Whether a claim request may take over the claim that holds a transfer: only an operator refund naming the
 * underpaid checkout session that holds it (the caller still refuses when a payment of the transfer is booked).
 * One rule for the ledger and for the in-memory responder of tests.
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
  Type.Object(
    {
      ok: Type.Literal(true),
      claimId: Id,
      /** false when this payment path and reference already held the claim (an idempotent repeat). */
      fresh: Type.Boolean(),
      claimedAt: IsoTime,
      /**
       * The payment booked with this claim (the first request's, on a repeat) and its ledger transaction. The
       * transaction is absent while the payment is parked (its transfer reorged away: booked when mined again) or
       * was refused as a conflict for an operator; both absent for a claim that books nothing.
       */
      paymentId: Type.Optional(Id),
      transactionId: Type.Optional(Id),
    },
    { additionalProperties: false },
  ),
  Type.Object(
    {
      ok: Type.Literal(false),
      reason: Type.Literal('claimed_elsewhere'),
      message: Type.String(),
      /** The payment path holding the claim. */
      claimedBy: Type.Object({ claimedVia: ClaimedVia, claimedAt: IsoTime }, { additionalProperties: false }),
    },
    { additionalProperties: false },
  ),
  Type.Object(
    {
      ok: Type.Literal(false),
      /** Operator refunds only: the ledger's books say the money is not there as requested. */
      reason: Type.Union([
        Type.Literal('transfer_reorged'),
        Type.Literal('amount_differs'),
        Type.Literal('payer_differs'),
      ]),
      message: Type.String(),
      booked: Type.Object({ from: Address, amount: UsdcAmount }, { additionalProperties: false }),
    },
    { additionalProperties: false },
  ),
  Type.Object(
    {
      ok: Type.Literal(false),
      reason: Type.Union([Type.Literal('invalid_request'), Type.Literal('internal_error')]),
      message: Type.String(),
    },
    { additionalProperties: false },
  ),
]);
