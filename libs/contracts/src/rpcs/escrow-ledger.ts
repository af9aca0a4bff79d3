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

/**
 * `ledger.reserve_payout` (settlement asks before a payout): moves the seller's whole available balance to
 * payout-pending when it is > 0 and at least `minimumAmount`, idempotently per settlementId (a repeat gets the
 * stored answer; a reservation given back since is refused as `reservation_cancelled`).
 */
export const ReservePayoutRequest = Type.Object(
  {
    settlementId: Id,
    sellerId: Id,
    /** Reserve nothing unless at least this much is available. */
    minimumAmount: UsdcAmount,
    /**
     * Settlement asks again with `true` once its transaction recording the payout committed: the reservation is then
     * its payout's, and the ledger's sweep of reservations whose answer was lost leaves it alone however long the
     * payout waits to be signed.
     */
    recorded: Type.Optional(Type.Boolean()),
    /**
     * Where settlement will send the payout: the ledger keeps it with the reservation, and
     * `ledger.authorize_transfer` refuses a payout transfer to any other address.
     */
    payoutAddress: Type.Optional(Address),
  },
  { additionalProperties: false },
);

export const ReservePayoutReply = Type.Union([
  Type.Object({ ok: Type.Literal(true), amount: UsdcAmount }, { additionalProperties: false }),
  Type.Object(
    {
      ok: Type.Literal(false),
      reason: Type.Union([Type.Literal('below_minimum'), Type.Literal('nothing_available')]),
      /** May be negative: refunds booked after a payout are owed by the seller. */
      available: SignedUsdcAmount,
    },
    { additionalProperties: false },
  ),
  Type.Object(
    {
      ok: Type.Literal(false),
      /**
       * Asked again (settlement lost the answer, or says it recorded the payout) after the reservation was given
       * back: swept as never claimed within PAYOUT_UNCLAIMED_AFTER_MS, or cancelled by `ledger.cancel_payout`. Its
       * money is available again, for a later settlement; no payout of this settlementId is authorised.
       */
      reason: Type.Literal('reservation_cancelled'),
      message: Type.String(),
    },
    { additionalProperties: false },
  ),
]);

/** `ledger.cancel_payout`: settlement gave a payout up; the reserved amount returns to the seller's balance. */
export const CancelPayoutRequest = Type.Object({ settlementId: Id }, { additionalProperties: false });

export const CancelPayoutReply = Type.Union([
  Type.Object(
    { ok: Type.Literal(true), status: Type.Union([Type.Literal('cancelled'), Type.Literal('refused')]) },
    { additionalProperties: false },
  ),
  Type.Object(
    {
      ok: Type.Literal(false),
      reason: Type.Union([Type.Literal('unknown_settlement'), Type.Literal('already_completed')]),
    },
    { additionalProperties: false },
  ),
]);

/** The kinds of transfer out of escrow that settlement sends, each authorised by the ledger first. */
export const EscrowTransferKind = Type.Union([
  Type.Literal('refund'),
  Type.Literal('payout'),
  Type.Literal('platform_payout'),
]);

/**
 * `ledger.authorize_transfer`: settlement asks before it signs any transfer out of escrow (and before it records
 * a refund from `refund.initiated`) whether the ledger booked exactly that transfer — the refund (refundId), the
 * seller payout (settlementId) or the platform payout (payoutId) — to that recipient for that amount, and has not
 * seen it sent. An event alone never moves money.
 */
export const AuthorizeTransferRequest = Type.Object(
  {
    kind: EscrowTransferKind,
    /** refundId, settlementId or payoutId: the transfer's idempotency key. */
    id: Id,
    to: Address,
    /** The exact amount settlement would send. */
    amount: UsdcAmount,
  },
  { additionalProperties: false },
);

export const AuthorizeTransferReply = Type.Union([
  Type.Object({ ok: Type.Literal(true) }, { additionalProperties: false }),
  Type.Object(
    {
      ok: Type.Literal(false),
      reason: Type.Union([
        /** The ledger booked no such refund or reservation: nothing may be sent (a forged or stray event). */
        Type.Literal('unknown_transfer'),
        Type.Literal('recipient_differs'),
        Type.Literal('amount_differs'),
        /** Its completion is booked already: sending it again would pay twice. */
        Type.Literal('already_sent'),
        /** Cancelled, refused or failed on the books. */
        Type.Literal('not_pending'),
      ]),
      message: Type.String(),
    },
    { additionalProperties: false },
  ),
]);

/**
 * `ledger.reserve_platform_payout` (an operator's platform payout): moves the whole platform revenue balance to
 * platform-payout-pending for `payoutId`, to be sent to `treasuryAddress`; idempotent per payoutId.
 */
export const ReservePlatformPayoutRequest = Type.Object(
  { payoutId: Id, treasuryAddress: Address },
  { additionalProperties: false },
);

export const ReservePlatformPayoutReply = Type.Union([
  Type.Object({ ok: Type.Literal(true), amount: UsdcAmount }, { additionalProperties: false }),
  Type.Object(
    { ok: Type.Literal(false), reason: Type.Literal('nothing_available') },
    { additionalProperties: false },
  ),
]);

/** `ledger.cancel_platform_payout`: the platform payout could not be sent; its reservation returns to revenue. */
export const CancelPlatformPayoutRequest = Type.Object({ payoutId: Id }, { additionalProperties: false });

export const CancelPlatformPayoutReply = Type.Union([
  Type.Object({ ok: Type.Literal(true) }, { additionalProperties: false }),
  Type.Object(
    {
      ok: Type.Literal(false),
      reason: Type.Union([Type.Literal('unknown_payout'), Type.Literal('already_completed')]),
    },
    { additionalProperties: false },
  ),
]);
