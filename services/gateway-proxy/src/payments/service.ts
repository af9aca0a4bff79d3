import { type PaymentKind, type PaymentProof, recoverPaymentSigner } from '@paygate/agent-client';
import { enqueueEvent } from '@paygate/bus';
import { createEvent, newEventId } from '@paygate/contracts';
import { formatUsdc, parseUsdc } from '@paygate/money';
import type { ServiceContext } from '@paygate/runtime';
import { currentTraceCarrier } from '@paygate/telemetry';
import type { ChainVerifier } from './chain';
import { failure, type PaymentFailure } from './failures';

export interface PaymentClaim {
  id: string;
  network: string;
  chain_id: number;
  tx_hash: string;
  log_index: number;
  payer: string;
  token: string;
  amount_micro: bigint;
  seller_id: string;
  skill_id: string | null;
  skill_name: string | null;
  endpoint_id: string | null;
  resource: string;
  kind: PaymentKind;
  channel: 'proxy' | 'ticket' | 'verify';
  state: 'in_flight' | 'served' | 'retryable';
  access_expires_at: Date | null;
  retry_until: Date | null;
  attempts: number;
  created_at: Date;
  updated_at: Date;
}

/** What is being sold, and to whom the money goes. */
export interface Purchase {
  resource: string;
  priceMicro: bigint;
  kind: PaymentKind;
  durationDays: number | null;
  sellerId: string;
  skillId: string | null;
  skillName: string | null;
  endpointId: string | null;
  holdPeriodHours: number;
  channel: PaymentClaim['channel'];
}

export type PresentOutcome =
  | { ok: true; claim: PaymentClaim; fresh: boolean; chainMs: number }
  | { ok: false; failure: PaymentFailure; chainMs: number };

export interface PaymentSettings {
  network: string;
  chainId: number;
  usdcAddress: string;
  escrowAddress: string;
  retryWindowSeconds: number;
  upstreamTimeoutMs: number;
  now: () => Date;
}

const MAX_CACHE_ENTRIES = 50_000;

interface ProofMemo {
  claimKey: string;
  fromLower: string;
  /** Recovered signer (lowercase, '' when recovery failed) by resource. */
  signers: Map<string, string>;
  staticPriceMicro: bigint | undefined;
  staticFailure: PaymentFailure | undefined;
}
const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * Accepts payment proofs: checks them, proves them on chain, and claims `network:txHash` with a unique
 * constraint in the same transaction that enqueues payment.confirmed, so of any number of concurrent
 * presentations exactly one is credited. Later presentations are served only under the reuse rules
 * (a subscription's payer until it expires; a failed upstream call's retry within the retry window).
 */
export class PaymentService {
  /** Recovered signer by (signature, tx, resource): recovery is pure, so its answer never changes. */
  private readonly signerCache = new Map<string, string>();
  /** Subscription claims never change once made (until they expire), so repeat calls skip Postgres. */
  private readonly subscriptionCache = new Map<string, PaymentClaim>();
  /**
   * Per decoded proof object (the route caches decoding per exact header string, so a repeating subscriber
   * presents the same object): its derived keys and recovered signers, to skip rebuilding long string keys.
   * Everything here is a pure function of the proof; expiry and scope are still checked on every call.
   */
  private readonly proofMemos = new WeakMap<PaymentProof, ProofMemo>();

  constructor(
    private readonly ctx: ServiceContext,
    private readonly chain: ChainVerifier,
    private readonly settings: PaymentSettings,
  ) {}

  private memoOf(proof: PaymentProof): ProofMemo {
    let memo = this.proofMemos.get(proof);
    if (!memo) {
      memo = {
        claimKey: `${proof.network}:${proof.txHash}`,
        fromLower: proof.from.toLowerCase(),
        signers: new Map(),
        staticPriceMicro: undefined,
        staticFailure: undefined,
      };
      this.proofMemos.set(proof, memo);
    }
    return memo;
  }

  private recoverSigner(proof: PaymentProof, resource: string): string | undefined {
    const memo = this.memoOf(proof);
    let known = memo.signers.get(resource);
    if (known === undefined) {
      known = this.recoverSignerUncached(proof, resource) ?? '';
      if (memo.signers.size >= 16) memo.signers.clear();
      memo.signers.set(resource, known);
    }
    return known || undefined;
  }

  private recoverSignerUncached(proof: PaymentProof, resource: string): string | undefined {
    const key = `${proof.signature}|${proof.txHash}|${resource}`;
    let signer = this.signerCache.get(key);
    if (signer === undefined) {
      try {
        signer = recoverPaymentSigner(proof.txHash, resource, proof.signature).toLowerCase();
      } catch {
        signer = '';
      }
      if (this.signerCache.size >= MAX_CACHE_ENTRIES) this.signerCache.clear();
      this.signerCache.set(key, signer);
    }
    return signer || undefined;
  }

  /** True when the proof is its payer's signature over this resource (pure, cached). */
  signedBy(proof: PaymentProof, resource: string): boolean {
    return this.recoverSigner(proof, resource) === this.memoOf(proof).fromLower;
  }

  /** staticCheck for a proof, remembered for the last price it was checked against (both are immutable). */
  private staticCheckMemo(proof: PaymentProof, purchase: Purchase): PaymentFailure | undefined {
    const memo = this.memoOf(proof);
    if (memo.staticPriceMicro !== purchase.priceMicro) {
      memo.staticFailure = this.staticCheck(proof, purchase);
      memo.staticPriceMicro = purchase.priceMicro;
    }
    return memo.staticFailure;
  }

  /** Checks that need neither Postgres nor the chain. */
  private staticCheck(proof: PaymentProof, purchase: Purchase): PaymentFailure | undefined {
    if (proof.network !== this.settings.network) {
      return failure(
        'wrong_network',
        `this gateway accepts payments on ${this.settings.network} (chain id ${this.settings.chainId}), not ${proof.network}`,
      );
    }
    if (proof.token.toLowerCase() !== this.settings.usdcAddress.toLowerCase()) {
      return failure('wrong_token', `payments must be in USDC at ${this.settings.usdcAddress}`);
    }
    if (proof.to.toLowerCase() !== this.settings.escrowAddress.toLowerCase()) {
      return failure(
        'wrong_recipient',
        `payments must go to the escrow wallet ${this.settings.escrowAddress}`,
      );
    }
    if (parseUsdc(proof.amount) < purchase.priceMicro) {
      return failure(
        'insufficient_amount',
        `the payment is ${proof.amount} USDC; the price is ${formatUsdc(purchase.priceMicro)} USDC`,
        { paid: proof.amount, price: formatUsdc(purchase.priceMicro) },
      );
    }
    return undefined;
  }

  /**
   * The hot path of a subscriber repeating a call: answered from the cached claim without a promise.
   * Undefined when the full path (Postgres, chain) must decide.
   */
  presentCached(proof: PaymentProof, purchase: Purchase): PresentOutcome | undefined {
    const memo = this.memoOf(proof);
    const claim = this.subscriptionCache.get(memo.claimKey);
    if (!claim || this.staticCheckMemo(proof, purchase)) return undefined;
    if (claim.payer.toLowerCase() !== memo.fromLower) return undefined;
    if (claim.skill_id !== purchase.skillId || purchase.skillId === null) return undefined;
    if (!claim.access_expires_at || claim.access_expires_at.getTime() <= this.settings.now().getTime())
      return undefined;
    if (this.recoverSigner(proof, claim.resource) !== memo.fromLower) return undefined;
    return { ok: true, claim, fresh: false, chainMs: 0 };
  }

  async present(proof: PaymentProof, purchase: Purchase): Promise<PresentOutcome> {
    const refused = this.staticCheck(proof, purchase);
    if (refused) return { ok: false, failure: refused, chainMs: 0 };
    const cacheKey = `${proof.network}:${proof.txHash}`;
    const cached = this.subscriptionCache.get(cacheKey);
    if (cached) return { ...(await this.reuse(cached, proof, purchase)), chainMs: 0 };
    const existing = await this.findClaim(proof);
    if (existing) return { ...(await this.reuse(existing, proof, purchase)), chainMs: 0 };

    if (this.recoverSigner(proof, purchase.resource) !== proof.from.toLowerCase()) {
      return { ok: false, failure: this.badSignature(), chainMs: 0 };
    }
    const chainStart = performance.now();
    const verified = await this.chain.verifyTransfer(proof, purchase.priceMicro);
    const chainMs = performance.now() - chainStart;
    if (!verified.ok) return { ok: false, failure: verified.failure, chainMs };

    const now = this.settings.now();
    const claimId = newEventId();
    const inserted = await this.ctx.inTransaction(async (trx) => {
      const row = (await trx
        .insertInto('payment_claims')
        .values({
          id: claimId,
          network: proof.network,
          chain_id: this.settings.chainId,
          tx_hash: proof.txHash,
          log_index: verified.transfer.logIndex,
          payer: proof.from,
          token: proof.token,
          amount_micro: verified.transfer.amountMicro,
          seller_id: purchase.sellerId,
          skill_id: purchase.skillId,
          skill_name: purchase.skillName,
          endpoint_id: purchase.endpointId,
          resource: purchase.resource,
          kind: purchase.kind,
          channel: purchase.channel,
          // A proxied pay-per-call stays in flight until the seller answered; everything else is served now.
          state: purchase.channel === 'proxy' && purchase.kind !== 'subscription' ? 'in_flight' : 'served',
          access_expires_at:
            purchase.kind === 'subscription'
              ? new Date(now.getTime() + (purchase.durationDays ?? 30) * DAY_MS)
              : null,
          retry_until: null,
          attempts: 1,
          created_at: now,
          updated_at: now,
        })
        .onConflict((oc) => oc.columns(['network', 'tx_hash']).doNothing())
        .returningAll()
        .executeTakeFirst()) as PaymentClaim | undefined;
      if (!row) return undefined;
      await enqueueEvent(
        trx,
        createEvent(
          'payment.confirmed',
          'gateway-proxy',
          {
            paymentId: claimId,
            source: 'x402',
            sellerId: purchase.sellerId,
            skillId: purchase.skillId,
            skillName: purchase.skillName,
            endpointId: purchase.endpointId,
            sessionId: null,
            payer: proof.from,
            amount: formatUsdc(verified.transfer.amountMicro),
            network: proof.network,
            chainId: this.settings.chainId,
            token: proof.token,
            txHash: proof.txHash,
            logIndex: verified.transfer.logIndex,
            holdPeriodHours: purchase.holdPeriodHours,
            confirmedAt: now.toISOString(),
          },
          { trace: currentTraceCarrier() },
        ),
      );
      return row;
    });
    if (inserted) {
      this.remember(inserted);
      return { ok: true, claim: inserted, fresh: true, chainMs };
    }
    // Lost the race: someone claimed this transfer between our read and our insert.
    const winner = await this.findClaim(proof);
    if (!winner) throw new Error(`claim on ${cacheKey} vanished`);
    return { ...(await this.reuse(winner, proof, purchase)), chainMs };
  }

  /** Drops cached subscription claims (tests that move the clock; an operator after a reversal). */
  forgetCachedClaims(): void {
    this.subscriptionCache.clear();
  }

  private remember(claim: PaymentClaim): void {
    if (claim.kind !== 'subscription') return;
    if (this.subscriptionCache.size >= MAX_CACHE_ENTRIES) this.subscriptionCache.clear();
    this.subscriptionCache.set(`${claim.network}:${claim.tx_hash}`, claim);
  }

  private badSignature(): PaymentFailure {
    return failure(
      'invalid_signature',
      "signature is not the payer's (from) EIP-191 signature over this tx hash and this resource",
    );
  }

  /** A transfer that was claimed before: serve it again only under the reuse rules. */
  private async reuse(
    claim: PaymentClaim,
    proof: PaymentProof,
    purchase: Purchase,
  ): Promise<{ ok: true; claim: PaymentClaim; fresh: false } | { ok: false; failure: PaymentFailure }> {
    const used = failure(
      'payment_already_used',
      `transaction ${proof.txHash} has already paid for something`,
    );
    if (claim.payer.toLowerCase() !== proof.from.toLowerCase()) return { ok: false, failure: used };
    // The proof must be the payer's signature over the resource the payment was claimed for.
    if (this.recoverSigner(proof, claim.resource) !== proof.from.toLowerCase()) {
      return { ok: false, failure: this.badSignature() };
    }
    const now = this.settings.now();
    if (claim.kind === 'subscription') {
      const sameScope =
        purchase.skillId !== null
          ? claim.skill_id === purchase.skillId
          : claim.skill_id === null && claim.seller_id === purchase.sellerId;
      if (!sameScope) return { ok: false, failure: used };
      if (!claim.access_expires_at || claim.access_expires_at.getTime() <= now.getTime()) {
        return {
          ok: false,
          failure: failure(
            'subscription_expired',
            `the subscription paid by ${proof.txHash} expired at ${claim.access_expires_at?.toISOString()}`,
          ),
        };
      }
      this.remember(claim);
      return { ok: true, claim, fresh: false };
    }
    // A pay-per-call whose seller call failed may be retried for the same resource within the window.
    if (claim.resource !== purchase.resource || claim.channel !== purchase.channel) {
      return { ok: false, failure: used };
    }
    const staleBefore = new Date(now.getTime() - this.settings.upstreamTimeoutMs - 5000);
    const retried = (await this.ctx.db
      .updateTable('payment_claims')
      .set((eb: any) => ({ state: 'in_flight', attempts: eb('attempts', '+', 1), updated_at: now }))
      .where('id', '=', claim.id)
      .where('retry_until', '>', now)
      .where('attempts', '<', 50)
      .where((eb: any) =>
        eb.or([
          eb('state', '=', 'retryable'),
          eb.and([eb('state', '=', 'in_flight'), eb('updated_at', '<', staleBefore)]),
        ]),
      )
      .returningAll()
      .executeTakeFirst()) as PaymentClaim | undefined;
    if (!retried) return { ok: false, failure: used };
    return { ok: true, claim: retried, fresh: false };
  }

  private async findClaim(proof: PaymentProof): Promise<PaymentClaim | undefined> {
    return (await this.ctx.db
      .selectFrom('payment_claims')
      .selectAll()
      .where('network', '=', proof.network)
      .where('tx_hash', '=', proof.txHash)
      .executeTakeFirst()) as PaymentClaim | undefined;
  }

  /** The seller answered: the pay-per-call payment is spent. */
  async markServed(claim: PaymentClaim): Promise<void> {
    if (claim.kind === 'subscription') return;
    await this.ctx.db
      .updateTable('payment_claims')
      .set({ state: 'served', updated_at: this.settings.now() })
      .where('id', '=', claim.id)
      .execute();
  }

  /** The seller failed (5xx or timeout): the payment stays usable for a retry of the same resource. */
  async markRetryable(claim: PaymentClaim): Promise<Date | undefined> {
    if (claim.kind === 'subscription') return undefined;
    const now = this.settings.now();
    // The window starts at the first failure and is not extended by later ones.
    const retryUntil = claim.retry_until ?? new Date(now.getTime() + this.settings.retryWindowSeconds * 1000);
    await this.ctx.db
      .updateTable('payment_claims')
      .set({ state: 'retryable', retry_until: retryUntil, updated_at: now })
      .where('id', '=', claim.id)
      .execute();
    return retryUntil;
  }
}
