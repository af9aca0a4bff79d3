import { type Static, Type } from '@sinclair/typebox';
import { Address, Id, IsoTime, TxHash, UsdcAmount } from '../primitives';

/**
 * Who may claim an on-chain transfer, i.e. spend it on one thing: an x402 proof at a paid skill URL (`x402`),
 * the seller middleware's `POST /api/verify` (`verify`), a checkout session (`checkout`), or an operator sending
 * unmatched money back (`operator_refund`).
 */
export const ClaimedVia = Type.Union([
  Type.Literal('x402'),
  Type.Literal('verify'),
  Type.Literal('checkout'),
  Type.Literal('operator_refund'),
]);

/** The values of ClaimedVia, for the rules below. */
const CLAIMED_VIA_VALUES = ClaimedVia.anyOf.map((literal) => literal.const);
export type ClaimedVia = Static<typeof ClaimedVia>;

/**
 * A claim's payment path on the wire: `claimedVia` (`claimed_via` in every service's tables). Its first wire name,
 * `channel`, is DEPRECATED. Every schema here refuses unknown fields, so a replica only understands a field name
 * its own release's schema knows; the rename goes in steps, each safe to roll out over the one before:
 * 1. readers (the ledger's RPC handler, `transfer.claimed` consumers, the claim client reading `claimedBy`) accept
 *    either name and take `claimedVia ?? channel` (claimedViaOf); producers still send `channel` only (shipped);
 * 2. producers send `claimedVia`, and for one release `channel` too (claimedViaOnWire; shipped);
 * 3. producers send `claimedVia` only (claimedViaOnWire; this release); readers keep accepting `channel` until no
 *    stream or dead letter can hold a message from before step 2, then step 4 removes `channel` from the schemas.
 */
export const ClaimedViaFields = {
  /** The payment path claiming the transfer. */
  claimedVia: Type.Optional(ClaimedVia),
  /** DEPRECATED old name of `claimedVia` (same value when both are sent); read claimedViaOf, never this alone. */
  channel: Type.Optional(ClaimedVia),
};

/**
 * The schema rule of an object with ClaimedViaFields: at least one of `claimedVia` and `channel`, and the same
 * value when both are there (a message naming two paths is refused, not read one way by some and another way by
 * others).
 */
export const claimedViaRule = {
  allOf: [
    { anyOf: [{ required: ['claimedVia'] }, { required: ['channel'] }] },
    {
      anyOf: [
        { not: { required: ['claimedVia', 'channel'] } },
        ...CLAIMED_VIA_VALUES.map((value) => ({
          properties: { claimedVia: { const: value }, channel: { const: value } },
        })),
      ],
    },
  ],
};

/**
 * The fields every producer of a claim puts on the wire for its payment path (step 3 above): the new name only.
 * Every reader has understood `claimedVia` since step 1's release, and step 2's release sent both names.
 */
export function claimedViaOnWire(claimedVia: ClaimedVia): { claimedVia: ClaimedVia } {
  return { claimedVia };
}

/** The payment path of a claim read off the wire: `claimedVia`, or `channel` from a producer older than it. */
export function claimedViaOf(fields: { claimedVia?: ClaimedVia; channel?: ClaimedVia }): ClaimedVia {
  const claimedVia = fields.claimedVia ?? fields.channel;
  // Unreachable for a validated message (claimedViaRule).
  if (claimedVia === undefined) throw new Error('a claim without claimedVia (or its old name channel)');
  return claimedVia;
}

/**
 * The ledger recorded the one claim on a transfer (chainId:txHash:logIndex): from now on it pays for what
 * `claimedVia` + `reference` name and nothing else. Checkout uses it to keep a claimed transfer off its list of
 * unmatched money, whichever of the claim and the transfer it hears of first.
 */
/** A claim's fields, shared by the `ledger.claim_transfer` request and the `transfer.claimed` event. */
export const TransferClaimFields = {
  chainId: Type.Integer({ minimum: 1 }),
  txHash: TxHash,
  logIndex: Type.Integer({ minimum: 0 }),
  ...ClaimedViaFields,
  /** What the transfer pays for, in the payment path's terms (`<network>:<txHash>`, a session id, a transfer id). */
  reference: Type.String({ minLength: 1, maxLength: 160 }),
  /** The transfer's sender and amount as the claimant saw them on chain. */
  payer: Address,
  amount: UsdcAmount,
};

export const TransferClaimed = Type.Object(
  { claimId: Id, ...TransferClaimFields, claimedAt: IsoTime },
  { additionalProperties: false, ...claimedViaRule },
);
