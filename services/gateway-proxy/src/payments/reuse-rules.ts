import { formatUsdc } from '@paygate/money';
import { failure, type PaymentFailure } from './failures';
import type { PaymentClaim, Purchase } from './types';

/** The reuse rules of a claimed transfer as pure decisions, so the cached and Postgres paths answer alike. */

/** What presenting an already-claimed transfer again may do. */
export type ReuseDecision =
  /** A subscription in scope and not expired: serve it from the claim as it is. */
  | { kind: 'serve' }
  /** A pay-per-call for the same resource and payment path: only a retry within the window (Postgres decides). */
  | { kind: 'retry' }
  | { kind: 'refuse'; failure: PaymentFailure };

/** Who presents the claim: the proof's payer (`from`, lowercase) and whose signature it carries over the claim's resource (or over the resource presented now). */
export interface Presenter {
  fromLower: string;
  /** The recovered signer (lowercase) over the claim's resource, else over the presented one; undefined when recovery failed. */
  signerLower: string | undefined;
}

/** Named like the ledger's refusals (`claimedBy`), so an agent sees which path spent the transfer. */
export const alreadyUsed = (claim: Pick<PaymentClaim, 'tx_hash' | 'claimed_via'>): PaymentFailure =>
  failure('payment_already_used', `transaction ${claim.tx_hash} has already paid for something`, {
    claimedBy: claim.claimed_via === 'verify' ? 'verify' : 'x402',
  });

export const badSignature = (): PaymentFailure =>
  failure(
    'invalid_signature',
    "signature is not the payer's (from) EIP-191 signature over this tx hash and this resource",
  );

/**
 * `presenter` is null when the payer is proven otherwise (the x402 authorization that paid); else the claim's payer
 * must sign. A subscription serves in its scope while its amount covers the price until it expires; a pay-per-call
 * only as a retry of the same resource and payment path.
 */
export function decideReuse(
  claim: PaymentClaim,
  presenter: Presenter | null,
  purchase: Purchase,
  now: Date,
): ReuseDecision {
  if (presenter) {
    if (claim.payer.toLowerCase() !== presenter.fromLower) {
      return { kind: 'refuse', failure: alreadyUsed(claim) };
    }
    if (presenter.signerLower !== presenter.fromLower) return { kind: 'refuse', failure: badSignature() };
  }
  if (claim.kind === 'subscription') {
    const sameScope =
      purchase.skillId !== null
        ? claim.skill_id === purchase.skillId
        : claim.skill_id === null && claim.seller_id === purchase.sellerId;
    // Subscription access only: a seller-wide subscription never pays for the seller's products, services or calls.
    if (!sameScope || purchase.kind !== 'subscription')
      return { kind: 'refuse', failure: alreadyUsed(claim) };
    // What the chain says was transferred, never the amount the presenter wrote into its proof: a subscription
    // paid at a cheap endpoint's price opens only endpoints that price covers.
    if (claim.amount_micro < purchase.priceMicro) {
      return {
        kind: 'refuse',
        failure: failure(
          'insufficient_amount',
          `the subscription paid by ${claim.tx_hash} transferred ${formatUsdc(claim.amount_micro)} USDC; this endpoint costs ${formatUsdc(purchase.priceMicro)} USDC`,
          { paid: formatUsdc(claim.amount_micro), price: formatUsdc(purchase.priceMicro) },
        ),
      };
    }
    if (!claim.access_expires_at || claim.access_expires_at.getTime() <= now.getTime()) {
      return {
        kind: 'refuse',
        failure: failure(
          'subscription_expired',
          `the subscription paid by ${claim.tx_hash} expired at ${claim.access_expires_at?.toISOString()}`,
        ),
      };
    }
    return { kind: 'serve' };
  }
  if (claim.resource !== purchase.resource || claim.claimed_via !== purchase.claimedVia) {
    return { kind: 'refuse', failure: alreadyUsed(claim) };
  }
  return { kind: 'retry' };
}
