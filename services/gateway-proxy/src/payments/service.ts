import { createEvent, newEventId, validateEvent } from '@paygate/contracts';
import { formatUsdc, parseUsdc } from '@paygate/money';
import { type PaymentKind, type PaymentProof, recoverPaymentSigner } from '@paygate/protocol';
import type { ServiceContext } from '@paygate/runtime';
import { currentTraceCarrier } from '@paygate/telemetry';
import { sql } from 'kysely';
import { LRUCache } from 'lru-cache';
import type { ChainVerifier } from './chain';
import type { LedgerClaims } from './claims';
import { failure, type PaymentFailure } from './failures';
import { alreadyUsed, badSignature, decideReuse, type Presenter, type ReuseDecision } from './reuse-rules';

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
  channel: 'proxy' | 'ticket' | 'verify' | 'facilitator';
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

/** What `verify` made of a tx-hash proof: decided already (refused, or a claim served again), or a transfer to claim. */
export type Verified =
  | { kind: 'decided'; outcome: PresentOutcome }
  | { kind: 'transfer'; transfer: { logIndex: number; amountMicro: bigint }; chainMs: number };

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

/** The ledger did not let this purchase spend the transfer: `failure` says why (already used elsewhere, or 503). */
export class LedgerClaimRefused extends Error {
  constructor(readonly failure: PaymentFailure) {
    super(failure.message);
    this.name = 'LedgerClaimRefused';
  }
}

/**
 * Accepts payment proofs: checks them, proves them on chain, and claims `network:txHash` with a unique
 * constraint in the same transaction that enqueues payment.confirmed, so of any number of concurrent
 * presentations exactly one is credited. Later presentations are served only under the reuse rules
 * (a subscription's payer until it expires; a failed upstream call's retry within the retry window).
 */
export class PaymentService {
  /** Recovered signer by (signature, tx, resource): recovery is pure, so its answer never changes. */
  private readonly signerCache = new LRUCache<string, string>({ max: MAX_CACHE_ENTRIES });
  /** Subscription claims never change once made (until they expire), so repeat calls skip Postgres. */
  private readonly subscriptionCache = new LRUCache<string, PaymentClaim>({ max: MAX_CACHE_ENTRIES });
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
    private readonly claims: LedgerClaims,
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
   * A claim already in memory (a subscription's, immutable until it expires) decided without Postgres by the same
   * checks and reuse rules (`decideReuse`) as a claim read from Postgres. Undefined when Postgres must decide.
   */
  private decideFromMemory(proof: PaymentProof, purchase: Purchase): PresentOutcome | undefined {
    const memo = this.memoOf(proof);
    const claim = this.subscriptionCache.get(memo.claimKey);
    if (!claim) return undefined;
    const refused = this.staticCheckMemo(proof, purchase);
    if (refused) return { ok: false, failure: refused, chainMs: 0 };
    const decision = decideReuse(
      claim,
      this.presenterOf(proof, claim, purchase),
      purchase,
      this.settings.now(),
    );
    if (decision.kind === 'serve') return { ok: true, claim, fresh: false, chainMs: 0 };
    if (decision.kind === 'refuse') return { ok: false, failure: decision.failure, chainMs: 0 };
    return undefined;
  }

  /**
   * Who presents a claimed transfer. The payer proves itself by signing either the resource the claim was made
   * for (the header it was served with) or the resource it asks for now (a fresh proof, as the docs describe it):
   * both are the payer's own signature over this tx hash, so a subscriber's new proof for another endpoint of the
   * skill is served, and a spent pay-per-call is refused as payment_already_used rather than invalid_signature.
   */
  private presenterOf(proof: PaymentProof, claim: PaymentClaim, purchase: Purchase): Presenter {
    const fromLower = this.memoOf(proof).fromLower;
    let signerLower = this.recoverSigner(proof, claim.resource);
    if (signerLower !== fromLower && purchase.resource !== claim.resource) {
      signerLower = this.recoverSigner(proof, purchase.resource);
    }
    return { fromLower, signerLower };
  }

  /** verify, then claim what it proved: the whole decision on a tx-hash proof (a seller's /api/verify). */
  async present(proof: PaymentProof, purchase: Purchase): Promise<PresentOutcome> {
    const verified = await this.verify(proof, purchase);
    return verified.kind === 'decided' ? verified.outcome : this.claim(proof, verified, purchase);
  }

  /**
   * A tx-hash proof's checks: its own fields, then either the claim already made on its transfer (served again
   * only under the reuse rules) or the transfer proven on chain, ready to be claimed. A subscription claim in
   * memory answers without Postgres or the chain.
   */
  async verify(proof: PaymentProof, purchase: Purchase): Promise<Verified> {
    const fromMemory = this.decideFromMemory(proof, purchase);
    if (fromMemory) return { kind: 'decided', outcome: fromMemory };
    const refused = this.staticCheckMemo(proof, purchase);
    if (refused) return { kind: 'decided', outcome: { ok: false, failure: refused, chainMs: 0 } };
    // The claim lookup runs beside the chain check (a fresh proof, the usual case, does not wait for it first);
    // a proof its payer did not sign for this resource is never looked up on chain.
    const existingClaim = this.findClaim(proof);
    if (!this.signedBy(proof, purchase.resource)) {
      const existing = await existingClaim;
      const outcome = existing
        ? await this.reuse(existing, proof, purchase)
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
      const outcome = await this.reuse(existing, proof, purchase);
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

  /**
   * Claims a transfer `verify` proved (insertClaim: the ledger's claim, then this gateway's row): exactly one of any
   * number of concurrent presentations is credited; one that lost the race is decided by the reuse rules.
   */
  async claim(
    proof: PaymentProof,
    verified: Extract<Verified, { kind: 'transfer' }>,
    purchase: Purchase,
  ): Promise<PresentOutcome> {
    const { transfer, chainMs } = verified;
    let inserted: PaymentClaim | undefined;
    try {
      inserted = await this.insertClaim(
        {
          txHash: proof.txHash,
          logIndex: transfer.logIndex,
          payer: proof.from,
          token: proof.token,
          amountMicro: transfer.amountMicro,
        },
        purchase,
      );
    } catch (error) {
      if (error instanceof LedgerClaimRefused) return { ok: false, failure: error.failure, chainMs };
      throw error;
    }
    if (inserted) {
      this.remember(inserted);
      return { ok: true, claim: inserted, fresh: true, chainMs };
    }
    // Lost the race: someone claimed this transfer between our read and our insert.
    const winner = await this.findClaim(proof);
    if (!winner) throw new Error(`claim on ${this.memoOf(proof).claimKey} vanished`);
    return { ...(await this.reuse(winner, proof, purchase)), chainMs };
  }

  /**
   * Claims an on-chain transfer for a purchase: one row per `network:txHash` (a unique constraint), inserted in the
   * same transaction that enqueues payment.confirmed. Undefined when the transfer was already claimed.
   * Used by the tx-hash proof (after the chain check) and by x402 (after the relayer's transfer was included).
   *
   * The ledger claims the transfer (`ledger.claim_transfer`) while the row is written, and the row commits only once
   * the ledger agreed: one transfer buys one thing across every channel (checkout sessions, /api/verify, operator
   * refunds). Every replica asks with the same reference (`<network>:<txHash>`), so a concurrent presentation here
   * is answered ok too and the local row decides.
   * Throws LedgerClaimRefused when the ledger refuses (another channel spent it) or does not answer in time.
   */
  async insertClaim(
    transfer: { txHash: string; logIndex: number; payer: string; token: string; amountMicro: bigint },
    purchase: Purchase,
    options: { state?: PaymentClaim['state']; retryUntil?: Date | null } = {},
  ): Promise<PaymentClaim | undefined> {
    // The ledger's claim and this gateway's row go out together: the row is written in a transaction that commits
    // only once the ledger answered that the transfer is this payment's (rolled back when it refused), so a fresh
    // payment waits for the slower of the two rather than for both in turn.
    const ledgerAnswer = this.claims.claim({
      chainId: this.settings.chainId,
      txHash: transfer.txHash.toLowerCase(),
      logIndex: transfer.logIndex,
      claimedVia: purchase.channel === 'verify' ? 'verify' : 'x402',
      reference: `${this.settings.network}:${transfer.txHash.toLowerCase()}`,
      payer: transfer.payer,
      amountMicro: transfer.amountMicro,
    });
    // Awaited in the transaction; one that fails to begin must not leave the answer's failure unhandled.
    ledgerAnswer.catch(() => undefined);
    const now = this.settings.now();
    const claimId = newEventId();
    const state =
      options.state ??
      // A proxied pay-per-call stays in flight until the seller answered; everything else is served now.
      (purchase.channel === 'proxy' && purchase.kind !== 'subscription' ? 'in_flight' : 'served');
    const accessExpiresAt =
      purchase.kind === 'subscription'
        ? new Date(now.getTime() + (purchase.durationDays ?? 30) * DAY_MS)
        : null;
    const confirmed = createEvent(
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
        payer: transfer.payer,
        amount: formatUsdc(transfer.amountMicro),
        network: this.settings.network as 'base' | 'base-sepolia' | 'local',
        chainId: this.settings.chainId,
        token: transfer.token,
        txHash: transfer.txHash,
        logIndex: transfer.logIndex,
        holdPeriodHours: purchase.holdPeriodHours,
        confirmedAt: now.toISOString(),
      },
      { trace: currentTraceCarrier() },
    );
    validateEvent(confirmed);
    return this.ctx.inTransaction(async (trx) => {
      // The claim row, and payment.confirmed in the outbox only when the row was inserted: one statement.
      const row = (
        await sql<PaymentClaim>`
          with claimed as (
            insert into payment_claims
                (id, network, chain_id, tx_hash, log_index, payer, token, amount_micro, seller_id, skill_id,
                 skill_name, endpoint_id, resource, kind, channel, state, access_expires_at, retry_until, attempts,
                 created_at, updated_at)
              values (${claimId}, ${this.settings.network}, ${this.settings.chainId}, ${transfer.txHash},
                ${transfer.logIndex}, ${transfer.payer}, ${transfer.token}, ${transfer.amountMicro},
                ${purchase.sellerId}, ${purchase.skillId}, ${purchase.skillName}, ${purchase.endpointId},
                ${purchase.resource}, ${purchase.kind}, ${purchase.channel}, ${state}, ${accessExpiresAt},
                ${options.retryUntil ?? null}, 1, ${now}, ${now})
              on conflict (network, tx_hash) do nothing
              returning *
          ),
          published as (
            insert into outbox (id, subject, envelope, published_at)
              select ${confirmed.id}::text, ${confirmed.type}::text, ${JSON.stringify(confirmed)}::jsonb, null
              from claimed
          )
          select * from claimed`.execute(trx)
      ).rows[0];
      const refusedByLedger = await ledgerAnswer;
      if (refusedByLedger) throw new LedgerClaimRefused(refusedByLedger);
      return row;
    });
  }

  /** Drops cached subscription claims (tests that move the clock; an operator after a reversal). */
  forgetCachedClaims(): void {
    this.subscriptionCache.clear();
  }

  private remember(claim: PaymentClaim): void {
    if (claim.kind !== 'subscription') return;
    this.subscriptionCache.set(`${claim.network}:${claim.tx_hash}`, claim);
  }

  /** A transfer that was claimed before: served again only under the reuse rules. */
  private reuse(
    claim: PaymentClaim,
    proof: PaymentProof,
    purchase: Purchase,
  ): Promise<{ ok: true; claim: PaymentClaim; fresh: false } | { ok: false; failure: PaymentFailure }> {
    return this.applyReuse(
      claim,
      decideReuse(claim, this.presenterOf(proof, claim, purchase), purchase, this.settings.now()),
    );
  }

  /**
   * The reuse rules of a claim whose payer is already proven (by the x402 authorization that paid it): a
   * subscription in scope until it expires, a failed seller call's retry of the same resource within the
   * retry window; nothing else.
   */
  reuseClaim(
    claim: PaymentClaim,
    purchase: Purchase,
  ): Promise<{ ok: true; claim: PaymentClaim; fresh: false } | { ok: false; failure: PaymentFailure }> {
    return this.applyReuse(claim, decideReuse(claim, null, purchase, this.settings.now()));
  }

  private async applyReuse(
    claim: PaymentClaim,
    decision: ReuseDecision,
  ): Promise<{ ok: true; claim: PaymentClaim; fresh: false } | { ok: false; failure: PaymentFailure }> {
    if (decision.kind === 'refuse') return { ok: false, failure: decision.failure };
    if (decision.kind === 'serve') {
      this.remember(claim);
      return { ok: true, claim, fresh: false };
    }
    // A pay-per-call whose seller call failed may be retried within the window.
    const now = this.settings.now();
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
    if (!retried) return { ok: false, failure: alreadyUsed(claim) };
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
