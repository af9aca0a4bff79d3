import { formatUsdc } from '@paygate/money';
import { failure, type PaymentFailure } from './failures';
import type { PaymentClaim, Purchase } from './types';

/** What presenting an already-claimed transfer again may do. */
export type ReuseDecision =
  | { kind: 'serve' }
  /** A pay-per-call: only a retry within the window, which Postgres decides. */
  | { kind: 'retry' }
  | { kind: 'refuse'; failure: PaymentFailure };

/** The proof's payer and the signer recovered over the claim's resource (else the presented one), both lowercase. */
export interface Presenter {
  fromLower: string;
  signerLower: string | undefined;
}

/** Named like the ledger's refusals (`claimedBy`), so an agent sees which path spent the transfer. */
export const alreadyUsed = (claim: Pick<PaymentClaim, 'tx_hash' | 'claimed_via'>): PaymentFailure =>
  failure('payment_already_used', `transaction ${claim.tx_hash} has already paid for something`, {
    claimedBy: claim.claimed_via === 'verify' ? 'verify' : 'x402',
  });

const refuse = (failure: PaymentFailure): ReuseDecision => ({ kind: 'refuse', failure });

export const badSignature = (): PaymentFailure =>
  failure(
    'invalid_signature',
    "signature is not the payer's (from) EIP-191 signature over this tx hash and this resource",
  );

/** The reuse rules as a pure decision, so the cached and Postgres paths agree; `presenter` null: payer proven by x402. */
export function decideReuse(
  claim: PaymentClaim,
  presenter: Presenter | null,
  purchase: Purchase,
  now: Date,
): ReuseDecision {
  if (presenter) {
    if (claim.payer.toLowerCase() !== presenter.fromLower) {
      return refuse(alreadyUsed(claim));
    }
    if (presenter.signerLower !== presenter.fromLower) return refuse(badSignature());
  }
  if (claim.kind === 'subscription') {
    const sameScope =
      purchase.skillId !== null
        ? claim.skill_id === purchase.skillId
        : claim.skill_id === null && claim.seller_id === purchase.sellerId;
    // Subscription access only: a seller-wide subscription never pays for the seller's products, services or calls.
    if (!sameScope || purchase.kind !== 'subscription') return refuse(alreadyUsed(claim));
    // What the chain says was transferred, never the proof's amount: a cheap endpoint's price opens only what it covers.
    if (claim.amount_micro < purchase.priceMicro) {
      return refuse(
        failure(
          'insufficient_amount',
          `the subscription paid by ${claim.tx_hash} transferred ${formatUsdc(claim.amount_micro)} USDC; this endpoint costs ${formatUsdc(purchase.priceMicro)} USDC`,
          { paid: formatUsdc(claim.amount_micro), price: formatUsdc(purchase.priceMicro) },
        ),
      );
    }
    if (!claim.access_expires_at || claim.access_expires_at.getTime() <= now.getTime()) {
      return refuse(
        failure(
          'subscription_expired',
          `the subscription paid by ${claim.tx_hash} expired at ${claim.access_expires_at?.toISOString()}`,
        ),
      );
    }
    return { kind: 'serve' };
  }
  if (claim.resource !== purchase.resource || claim.claimed_via !== purchase.claimedVia) {
    return refuse(alreadyUsed(claim));
  }
  return { kind: 'retry' };
}
