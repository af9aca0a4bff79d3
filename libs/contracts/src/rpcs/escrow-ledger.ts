import { Type } from '@sinclair/typebox';
import { ClaimedViaFields, claimedViaRule, TransferClaimFields } from '../events/claims';
import { Address, Id, IsoTime, SignedUsdcAmount, UsdcAmount } from '../primitives';

/**
 * `ledger.claim_transfer`: spend an on-chain transfer on one thing. The first claim of a transfer
 * (chainId, txHash, logIndex) wins, whatever path claims it and on every replica (a unique row in the ledger); a
 * repeated claim with the same payment path (`claimedVia`) and reference is answered ok again (retries, a subscription's re-use,
 * a redelivered event), any other is refused with who holds it.
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
  },
  { additionalProperties: false, ...claimedViaRule },
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
    },
    { additionalProperties: false },
  ),
  Type.Object(
    {
      ok: Type.Literal(false),
      reason: Type.Literal('claimed_elsewhere'),
      message: Type.String(),
      /** The payment path holding the claim: `claimedVia`, or only `channel` from a ledger older than it. */
      claimedBy: Type.Object(
        { ...ClaimedViaFields, claimedAt: IsoTime },
        { additionalProperties: false, ...claimedViaRule },
      ),
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
