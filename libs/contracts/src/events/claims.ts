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

export type ClaimedVia = Static<typeof ClaimedVia>;

/**
 * The payment paths whose claims `transfer.claimed` announces: those outside checkout. Checkout is its one reader
 * (a transfer another path spent is not unmatched money); its own claims (sessions, operator refunds) are recorded
 * by the decision that made them, so announcing them would be an outbox row and a publish per checkout payment that
 * nothing reads.
 */
const ANNOUNCED_CLAIMS: ReadonlySet<ClaimedVia> = new Set<ClaimedVia>(['x402', 'verify']);

/** Whether a fresh claim through `claimedVia` is announced as `transfer.claimed` (ANNOUNCED_CLAIMS). */
export function claimIsAnnounced(claimedVia: ClaimedVia): boolean {
  return ANNOUNCED_CLAIMS.has(claimedVia);
}

/** A claim's fields, shared by the `ledger.claim_transfer` request and the `transfer.claimed` event. */
export const TransferClaimFields = {
  chainId: Type.Integer({ minimum: 1 }),
  txHash: TxHash,
  logIndex: Type.Integer({ minimum: 0 }),
  /** The payment path claiming the transfer. */
  claimedVia: ClaimedVia,
  /** What the transfer pays for, in the payment path's terms (`<network>:<txHash>`, a session id, a transfer id). */
  reference: Type.String({ minLength: 1, maxLength: 160 }),
  /** The transfer's sender and amount as the claimant saw them on chain. */
  payer: Address,
  amount: UsdcAmount,
};

/**
 * The ledger recorded the one claim on a transfer (chainId:txHash:logIndex) through a payment path outside checkout
 * (claimIsAnnounced): from now on it pays for what `claimedVia` + `reference` name and nothing else. Checkout uses it
 * to keep a claimed transfer off its list of unmatched money, whichever of the claim and the transfer it hears of
 * first.
 */
export const TransferClaimed = Type.Object(
  { claimId: Id, ...TransferClaimFields, claimedAt: IsoTime },
  { additionalProperties: false },
);
