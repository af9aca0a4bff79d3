import type { PaymentProof } from '@paygate/protocol';
import { LRUCache } from 'lru-cache';
import type { GatewayContext } from '../db';
import { ClaimInvariantError, LedgerClaimRefused } from '../errors';
import type { ChainVerifier } from '../x402/mechanisms/tx-hash/chain';
import { MAX_CACHE_ENTRIES, ProofChecks } from '../x402/mechanisms/tx-hash/proof-checks';
import { PaymentClaimRows } from './claim-rows';
import { NO_RECORD } from './claim-statement';
import type { PaymentFailure } from './failures';
import { alreadyUsed, badSignature, decideReuse } from './reuse-rules';
import type { PaymentClaim, PaymentSettings, PresentOutcome, Purchase, Verified } from './types';

export type { PaymentClaim, PresentOutcome, Purchase, Verified } from './types';

type Reused = { ok: true; claim: PaymentClaim; fresh: false } | { ok: false; failure: PaymentFailure };

/** Tx-hash proofs: checked, proven on chain and claimed once the ledger booked them; later ones by the reuse rules. */
export class PaymentService {
  /** Subscription claims never change once made (until they expire), so repeat calls skip Postgres. */
  private readonly subscriptionCache = new LRUCache<string, PaymentClaim>({ max: MAX_CACHE_ENTRIES });
  readonly checks: ProofChecks;
  readonly rows: PaymentClaimRows;

  constructor(
    ctx: GatewayContext,
    private readonly chain: ChainVerifier,
    private readonly settings: PaymentSettings,
  ) {
    this.checks = new ProofChecks(settings);
    this.rows = new PaymentClaimRows(ctx, settings);
  }

  /** A cached subscription claim decided without Postgres by the same rules; undefined when Postgres must decide. */
  private decideFromMemory(proof: PaymentProof, purchase: Purchase): PresentOutcome | undefined {
    const claim = this.subscriptionCache.get(this.checks.claimKeyOf(proof));
    if (!claim) return undefined;
    const refused = this.checks.staticCheckMemo(proof, purchase);
    if (refused) return { ok: false, failure: refused, chainMs: 0 };
    const decision = decideReuse(
      claim,
      this.checks.presenterOf(proof, claim, purchase),
      purchase,
      this.settings.now(),
    );
    if (decision.kind === 'serve') return { ok: true, claim, fresh: false, chainMs: 0 };
    if (decision.kind === 'refuse') return { ok: false, failure: decision.failure, chainMs: 0 };
    return undefined;
  }

  /** verify, then claim what it proved: the whole decision on a tx-hash proof (a seller's /api/verify). */
  async present(proof: PaymentProof, purchase: Purchase): Promise<PresentOutcome> {
    const verified = await this.verify(proof, purchase);
    return verified.kind === 'decided' ? verified.outcome : this.claim(proof, verified, purchase);
  }

  /** A proof's own checks, then the claim already on its transfer (reuse rules) or the transfer proven on chain. */
  verify(proof: PaymentProof, purchase: Purchase): Verified | Promise<Verified> {
    const fromMemory = this.decideFromMemory(proof, purchase);
    if (fromMemory) return { kind: 'decided', outcome: fromMemory };
    return this.verifyBeyondMemory(proof, purchase);
  }

  private async verifyBeyondMemory(proof: PaymentProof, purchase: Purchase): Promise<Verified> {
    const refused = this.checks.staticCheckMemo(proof, purchase);
    if (refused) return { kind: 'decided', outcome: { ok: false, failure: refused, chainMs: 0 } };
    // The claim lookup runs beside the chain check; a proof its payer did not sign is never looked up on chain.
    const existingClaim = this.rows.find(proof.network, proof.txHash);
    if (!this.checks.signedBy(proof, purchase.resource)) {
      const existing = await existingClaim;
      const outcome = existing
        ? await this.reuseClaim(existing, purchase, proof)
        : { ok: false as const, failure: badSignature() };
      return { kind: 'decided', outcome: { ...outcome, chainMs: 0 } };
    }
    const chainStart = performance.now();
    const onChain = this.chain.verifyTransfer(proof, purchase.priceMicro).then(
      (verified) => ({ verified, chainMs: performance.now() - chainStart }),
      (error: unknown) => ({ error, chainMs: performance.now() - chainStart }),
    );
    const existing = await existingClaim;
    if (existing) {
      const outcome = await this.reuseClaim(existing, purchase, proof);
      return { kind: 'decided', outcome: { ...outcome, chainMs: 0 } };
    }
    const chain = await onChain;
    if ('error' in chain) throw chain.error;
    if (!chain.verified.ok) {
      return {
        kind: 'decided',
        outcome: { ok: false, failure: chain.verified.failure, chainMs: chain.chainMs },
      };
    }
    return { kind: 'transfer', transfer: chain.verified.transfer, chainMs: chain.chainMs };
  }

  async claim(
    proof: PaymentProof,
    verified: Extract<Verified, { kind: 'transfer' }>,
    purchase: Purchase,
  ): Promise<PresentOutcome> {
    const { transfer, chainMs } = verified;
    let inserted: PaymentClaim | undefined;
    try {
      const { txHash, from: payer, token } = proof;
      const { logIndex, amountMicro } = transfer;
      const transferClaim = { txHash, logIndex, payer, token, amountMicro };
      inserted = (await this.rows.insertRecorded(transferClaim, purchase, {}, NO_RECORD)).claim;
    } catch (error) {
      if (error instanceof LedgerClaimRefused) return { ok: false, failure: error.failure, chainMs };
      throw error;
    }
    if (inserted) {
      this.remember(inserted);
      return { ok: true, claim: inserted, fresh: true, chainMs };
    }
    // Lost the race: someone claimed this transfer between our read and our insert.
    const winner = await this.rows.find(proof.network, proof.txHash);
    if (!winner) throw new ClaimInvariantError(`claim on ${this.checks.claimKeyOf(proof)} vanished`);
    return { ...(await this.reuseClaim(winner, purchase, proof)), chainMs };
  }

  /** Drops cached subscription claims (tests that move the clock; an operator after a reversal). */
  forgetCachedClaims(): void {
    this.subscriptionCache.clear();
  }

  private remember(claim: PaymentClaim): void {
    if (claim.kind !== 'subscription') return;
    this.subscriptionCache.set(`${claim.network}:${claim.tx_hash}`, claim);
  }

  /** The reuse rules on a claim presented again; without `proof` its payer was proven by x402. */
  async reuseClaim(claim: PaymentClaim, purchase: Purchase, proof?: PaymentProof): Promise<Reused> {
    const presenter = proof ? this.checks.presenterOf(proof, claim, purchase) : null;
    const decision = decideReuse(claim, presenter, purchase, this.settings.now());
    if (decision.kind === 'refuse') return { ok: false, failure: decision.failure };
    if (decision.kind === 'serve') {
      this.remember(claim);
      return { ok: true, claim, fresh: false };
    }
    const retried = await this.rows.reopenForRetry(claim);
    if (!retried) return { ok: false, failure: alreadyUsed(claim) };
    return { ok: true, claim: retried, fresh: false };
  }
}
