import type { RelayerSubmitReply } from '@paygate/contracts';
import type { SharedRateLimiter } from '@paygate/http';
import { type BackgroundTask, PollingLoop, type ServiceContext } from '@paygate/runtime';
import { Interface, type JsonRpcProvider } from 'ethers';
import {
  LedgerClaimRefused,
  type PaymentClaim,
  type PaymentService,
  type Purchase,
} from '../payments/service';
import type { DecodedX402Payment, X402Offer } from './protocol';
import type { RelayerClient } from './relayer-client';
import {
  authorizationUsedOnChain,
  checkAuthorization,
  signedByPayer,
  usdcBalance,
  verifyAuthorizationSignature,
  type X402Expectation,
  type X402Reason,
} from './verify';

export interface X402Settings {
  chainId: number;
  usdcAddress: string;
  escrowAddress: string;
  /** How long a client's authorization has to be settled (the requirements' maxTimeoutSeconds). */
  maxTimeoutSeconds: number;
  /** How long a paid call waits for the relayer's transaction to be included before answering 503. */
  inclusionWaitMs: number;
  retryWindowSeconds: number;
  /** The relayer request's own timeout (beyond the inclusion wait). */
  relayerTimeoutMs: number;
  /** An authorization still `submitting` this long (its caller gave up or the process died) is finished by the recovery pass. */
  recoveryAfterMs: number;
  recoveryIntervalMs: number;
  /** The smallest payment the relayer submits (micro-USDC): its gas must be worth the payment. */
  minAmountMicro: number | bigint;
  /**
   * Relayed transactions per UTC day, counted per payer wallet and per seller (one-day windows, every hit
   * counted in Postgres): a fresh authorization over either budget is refused before the relayer sees it.
   */
  relayerBudgets: { perPayer: SharedRateLimiter; perSeller: SharedRateLimiter };
  now: () => Date;
}

export interface X402Timings {
  /** Paygate's checks: the gateway's (authorization, signature, claim) and the relayer's before simulating. */
  verificationMs: number;
  simulationMs: number;
  submissionMs: number;
  inclusionMs: number;
}

export type X402Outcome =
  | { ok: true; claim: PaymentClaim; txHash: string; payer: string; fresh: boolean; timings: X402Timings }
  | {
      ok: false;
      status: 402 | 429 | 503;
      reason: X402Reason | 'x402_unavailable' | 'relayer_daily_limit';
      message: string;
      /** 429 only: when the day's budget starts afresh. */
      retryAfterSeconds?: number;
    };

type Refused = Extract<X402Outcome, { ok: false }>;
const refused = (status: 402 | 503, reason: Refused['reason'], message: string): Refused => ({
  ok: false,
  status,
  reason,
  message,
});

/** What a verification holds the authorization to besides the price. */
export interface VerifyOptions {
  /** Read the payer's balance (settling skips it: the relayer's simulation refuses without spending gas). */
  checkBalance: boolean;
  /**
   * The facilitator's /verify: refuse an authorization already presented here or used on chain, so a seller's
   * x402 server never serves a replay (settling answers a replay through the purchase's reuse rules instead).
   */
  refuseUsed?: boolean;
  /** The requirements' maxTimeoutSeconds when not Paygate's own (the facilitator's sellers choose theirs). */
  maxTimeoutSeconds?: number;
}

/** The relayer's refusals, as x402 reason codes; transient ones (nothing was sent) answer 503. */
const RELAYER_REASONS: Record<
  Extract<RelayerSubmitReply, { ok: false }>['reason'],
  [402 | 503, Refused['reason']]
> = {
  invalid_request: [402, 'invalid_payload'],
  internal_error: [503, 'x402_unavailable'],
  relayer_unavailable: [503, 'x402_unavailable'],
  relayer_out_of_gas: [503, 'x402_unavailable'],
  chain_unavailable: [503, 'x402_unavailable'],
  insufficient_funds: [402, 'invalid_exact_evm_insufficient_balance'],
  invalid_signature: [402, 'invalid_exact_evm_signature'],
  authorization_expired: [402, 'invalid_exact_evm_payload_authorization_valid_before'],
  authorization_not_yet_valid: [402, 'invalid_exact_evm_payload_authorization_valid_after'],
  nonce_already_used: [402, 'invalid_exact_evm_nonce_already_used'],
  authorization_conflict: [402, 'invalid_exact_evm_nonce_already_used'],
  simulation_failed: [402, 'invalid_exact_evm_transaction_simulation_failed'],
  transaction_failed: [402, 'invalid_exact_evm_transaction_failed'],
};

const tokenMeta = new Interface([
  'function name() view returns (string)',
  'function version() view returns (string)',
]);

interface AuthorizationRow {
  chain_id: number;
  token: string;
  payer: string;
  auth_nonce: string;
  signature: string;
  resource: string;
  state: 'submitting' | 'settled' | 'refused';
  reason: string | null;
  tx_hash: string | null;
  claim_id: string | null;
  purchase: Purchase & { priceMicro: string };
  to_address: string;
  value_micro: bigint;
  valid_after: bigint;
  valid_before: bigint;
}

const RECOVERY_BATCH = 50;

/**
 * Accepts x402 `exact` payments (EIP-3009 authorizations) for Paygate's own skills and for sellers using Paygate
 * as their facilitator. Checks run against Paygate's requirements, then the authorization is claimed (one
 * authorization, one purchase, across replicas), then settlement's relayer submits it; once its transfer is
 * included, the transfer is claimed like any payment (payment_claims + payment.confirmed in one transaction).
 */
export class X402Payments implements BackgroundTask {
  private eip712: { name: string; version: string } | undefined;
  private readonly recovered = new WeakMap<DecodedX402Payment, boolean>();
  private readonly recovery: PollingLoop;

  constructor(
    private readonly ctx: ServiceContext,
    private readonly provider: JsonRpcProvider,
    private readonly payments: PaymentService,
    readonly relayer: RelayerClient,
    readonly settings: X402Settings,
  ) {
    this.recovery = new PollingLoop(() => this.recoverOnce(), {
      what: 'x402 recovery pass',
      logger: ctx.logger,
      intervalMs: settings.recoveryIntervalMs,
    });
  }

  start(): void {
    this.keepOfferFresh();
    this.recovery.start();
  }

  /**
   * Reads the token domain and the relayer's status ahead of the 402 path, which never waits for them: at start
   * (so the first 402 already offers x402) and on every recovery pass (so a relayer that comes up later is seen).
   */
  private keepOfferFresh(): void {
    this.knownTokenDomain();
    this.relayer.knownAvailable();
  }

  stop(): Promise<void> {
    return this.recovery.stop();
  }

  /** The token's EIP-712 domain name and version, read from the contract once (clients sign in that domain). */
  async tokenDomain(): Promise<{ name: string; version: string }> {
    if (!this.eip712) {
      const [name, version] = await Promise.all(
        (['name', 'version'] as const).map(async (fn) => {
          const result = await this.provider.call({
            to: this.settings.usdcAddress,
            data: tokenMeta.encodeFunctionData(fn, []),
          });
          return tokenMeta.decodeFunctionResult(fn, result)[0] as string;
        }),
      );
      this.eip712 = { name: name!, version: version! };
    }
    return this.eip712;
  }

  /** The domain if already read (the 402 path never waits for the chain). */
  knownTokenDomain(): { name: string; version: string } | undefined {
    if (!this.eip712) this.tokenDomain().catch(() => undefined);
    return this.eip712;
  }

  /**
   * The wallet a payment may be rate-limited as: its payer when the (EOA) signature is the payer's, so nobody
   * can spend another wallet's quota; undefined otherwise (the caller counts it against the client address).
   */
  walletOf(payment: DecodedX402Payment): string | undefined {
    const eip712 = this.knownTokenDomain();
    if (!eip712) return undefined;
    return this.recoveredPayer(payment, {
      chainId: this.settings.chainId,
      asset: this.settings.usdcAddress,
      eip712,
    })
      ? payment.authorization.from.toLowerCase()
      : undefined;
  }

  /** Whether the payer's EOA signature recovers (local ECDSA), remembered per decoded payment. */
  private recoveredPayer(
    payment: DecodedX402Payment,
    expected: Pick<X402Expectation, 'chainId' | 'asset' | 'eip712'>,
  ): boolean {
    let known = this.recovered.get(payment);
    if (known === undefined) {
      known = signedByPayer(expected, payment.authorization, payment.signature);
      this.recovered.set(payment, known);
    }
    return known;
  }

  /** Whether a 402 may offer x402 right now: the token domain is known and the relayer can pay gas. */
  offered(): boolean {
    return this.knownTokenDomain() !== undefined && this.relayer.knownAvailable() === true;
  }

  offer(input: {
    url: string;
    description: string;
    mimeType: string;
    priceMicro: bigint;
  }): X402Offer | undefined {
    const eip712 = this.knownTokenDomain();
    if (!eip712) return undefined;
    // Below the minimum the relayer's gas is not worth it: the buyer pays with X-402-Payment instead.
    if (input.priceMicro < BigInt(this.settings.minAmountMicro)) return undefined;
    return {
      chainId: this.settings.chainId,
      asset: this.settings.usdcAddress,
      payTo: this.settings.escrowAddress,
      amountMicro: input.priceMicro,
      maxTimeoutSeconds: this.settings.maxTimeoutSeconds,
      eip712,
      resource: { url: input.url, description: input.description, mimeType: input.mimeType },
    };
  }

  private async expectation(priceMicro: bigint, maxTimeoutSeconds?: number): Promise<X402Expectation> {
    return {
      chainId: this.settings.chainId,
      asset: this.settings.usdcAddress,
      payTo: this.settings.escrowAddress,
      amountMicro: priceMicro,
      eip712: await this.tokenDomain(),
      minAmountMicro: BigInt(this.settings.minAmountMicro),
      maxTimeoutSeconds: maxTimeoutSeconds ?? this.settings.maxTimeoutSeconds,
    };
  }

  /** Verification only (the facilitator's /verify): every check short of submitting. */
  async verify(
    payment: DecodedX402Payment,
    priceMicro: bigint,
    options: VerifyOptions = { checkBalance: true },
  ): Promise<Refused | undefined> {
    let expected: X402Expectation;
    try {
      expected = await this.expectation(priceMicro, options.maxTimeoutSeconds);
    } catch {
      return refused(503, 'x402_unavailable', 'the chain RPC did not answer; retry shortly');
    }
    const nowSeconds = Math.floor(this.settings.now().getTime() / 1000);
    const staticRefusal = checkAuthorization(payment, expected, nowSeconds);
    if (staticRefusal) return refused(402, staticRefusal.reason, staticRefusal.message);
    try {
      const signed =
        this.recoveredPayer(payment, expected) ||
        (await verifyAuthorizationSignature(
          this.provider,
          expected,
          payment.authorization,
          payment.signature,
        ));
      if (!signed) {
        return refused(
          402,
          'invalid_exact_evm_signature',
          "the signature is not the payer's EIP-712 TransferWithAuthorization in the token's domain",
        );
      }
      // Settling skips this read: the relayer's simulation refuses a payer without the money, spending no gas.
      const balance = options.checkBalance
        ? await usdcBalance(this.provider, this.settings.usdcAddress, payment.authorization.from)
        : BigInt(payment.authorization.value);
      if (balance < BigInt(payment.authorization.value)) {
        return refused(
          402,
          'invalid_exact_evm_insufficient_balance',
          `the payer holds ${balance} atomic units, less than the ${payment.authorization.value} authorized`,
        );
      }
      if (options.refuseUsed && (await this.alreadyUsed(payment))) {
        return refused(
          402,
          'invalid_exact_evm_nonce_already_used',
          'this authorization was already used (on chain or presented for settlement); sign a new one',
        );
      }
    } catch {
      return refused(503, 'x402_unavailable', 'the chain RPC did not answer; retry shortly');
    }
    return undefined;
  }

  /** Presented here before (any state) or used on chain (by anyone): EIP-3009's authorizationState. */
  async alreadyUsed(payment: DecodedX402Payment): Promise<boolean> {
    const a = payment.authorization;
    const presented = await this.ctx.db
      .selectFrom('x402_authorizations')
      .select('auth_nonce')
      .where('chain_id', '=', this.settings.chainId)
      .where('token', '=', this.settings.usdcAddress.toLowerCase())
      .where('payer', '=', a.from.toLowerCase())
      .where('auth_nonce', '=', a.nonce.toLowerCase())
      .executeTakeFirst();
    return (
      presented !== undefined || (await authorizationUsedOnChain(this.provider, this.settings.usdcAddress, a))
    );
  }

  /**
   * Counts a fresh authorization against the payer's and the seller's relayer budgets of the UTC day; the
   * refusal when either is spent. Counted before submitting, so a refused or failed submission counts too.
   */
  private async overRelayerBudget(payer: string, sellerId: string): Promise<Refused | undefined> {
    const { perPayer, perSeller } = this.settings.relayerBudgets;
    for (const [limiter, bucket, whose] of [
      [perPayer, `relayer-payer:${payer.toLowerCase()}`, 'payer wallet'],
      [perSeller, `relayer-seller:${sellerId}`, 'seller'],
    ] as const) {
      const decision = await limiter.hit(bucket);
      if (!decision.allowed) {
        return {
          ok: false,
          status: 429,
          reason: 'relayer_daily_limit',
          message: `Paygate relays at most ${decision.limit} x402 payments per day per ${whose}; retry in ${decision.retryAfterSeconds} s, or pay with X-402-Payment (a USDC transfer you send yourself)`,
          retryAfterSeconds: decision.retryAfterSeconds,
        };
      }
    }
    return undefined;
  }

  /** Verifies, claims the authorization for the purchase, has it submitted and waits for its inclusion. */
  async settle(
    payment: DecodedX402Payment,
    purchase: Purchase,
    version: 1 | 2,
    options: { maxTimeoutSeconds?: number } = {},
  ): Promise<X402Outcome> {
    const started = performance.now();
    const notValid = await this.verify(payment, purchase.priceMicro, {
      checkBalance: false,
      maxTimeoutSeconds: options.maxTimeoutSeconds,
    });
    if (notValid) return notValid;
    if (!(await this.relayer.available())) {
      return refused(
        503,
        'x402_unavailable',
        'x402 settlement is unavailable right now; pay with X-402-Payment',
      );
    }
    const a = payment.authorization;
    const now = this.settings.now();
    const key = {
      chain_id: this.settings.chainId,
      token: this.settings.usdcAddress.toLowerCase(),
      payer: a.from.toLowerCase(),
      auth_nonce: a.nonce.toLowerCase(),
    };
    const inserted = await this.ctx.db
      .insertInto('x402_authorizations')
      .values({
        ...key,
        signature: payment.signature.toLowerCase(),
        to_address: a.to.toLowerCase(),
        value_micro: BigInt(a.value),
        valid_after: BigInt(a.validAfter),
        valid_before: BigInt(a.validBefore),
        resource: purchase.resource,
        seller_id: purchase.sellerId,
        purchase: JSON.stringify({ ...purchase, priceMicro: purchase.priceMicro.toString() }),
        x402_version: version,
        state: 'submitting',
        created_at: now,
        updated_at: now,
      })
      .onConflict((oc: any) => oc.columns(['chain_id', 'token', 'payer', 'auth_nonce']).doNothing())
      .returning(['auth_nonce'])
      .executeTakeFirst();
    if (!inserted) return this.presentedBefore(key, payment, purchase);
    // Over budget (or not counted): nothing is submitted, and the same authorization may come back.
    let overBudget: Refused | undefined;
    try {
      overBudget = await this.overRelayerBudget(a.from, purchase.sellerId);
    } catch (error) {
      await this.forget(key);
      throw error;
    }
    if (overBudget) {
      await this.forget(key);
      return overBudget;
    }
    const verificationMs = performance.now() - started;

    let reply: RelayerSubmitReply;
    try {
      reply = await this.relayer.submit({
        chainId: this.settings.chainId,
        token: this.settings.usdcAddress,
        authorization: a,
        signature: payment.signature,
        waitForReceiptMs: this.settings.inclusionWaitMs,
      });
    } catch (error) {
      this.ctx.logger.warn(
        { err: error, payer: a.from },
        'relayer did not answer; the recovery pass will finish',
      );
      return refused(
        503,
        'x402_unavailable',
        'settlement did not answer in time; present the same payment again',
      );
    }
    if (!reply.ok) {
      const [status, reason] = RELAYER_REASONS[reply.reason];
      if (status === 503) {
        // Nothing was sent: the same authorization may be presented again.
        await this.forget(key);
      } else {
        await this.markRefused(key, reason);
      }
      return refused(status, reason, reply.message);
    }
    if (reply.status !== 'confirmed') {
      return refused(
        503,
        'x402_unavailable',
        `transaction ${reply.txHash} is not included yet; present the same payment again shortly`,
      );
    }
    let claim: PaymentClaim | undefined;
    try {
      claim = await this.claimTransfer(key, payment, purchase, reply, 'live');
    } catch (error) {
      if (!(error instanceof LedgerClaimRefused)) throw error;
      // The ledger did not answer: the row stays `submitting`, the recovery pass claims it later.
      return refused(503, 'x402_unavailable', error.failure.message);
    }
    if (!claim) {
      return refused(
        402,
        'invalid_exact_evm_nonce_already_used',
        `transaction ${reply.txHash} already paid for something`,
      );
    }
    return {
      ok: true,
      claim,
      txHash: reply.txHash,
      payer: a.from,
      fresh: true,
      timings: {
        verificationMs: verificationMs + reply.timings.checksMs,
        simulationMs: reply.timings.simulationMs,
        submissionMs: reply.timings.submissionMs,
        inclusionMs: reply.timings.inclusionMs,
      },
    };
  }

  /** The transfer the relayer got included, claimed like any payment; the authorization row records it. */
  private async claimTransfer(
    key: Record<string, unknown>,
    payment: Pick<DecodedX402Payment, 'authorization'>,
    purchase: Purchase,
    reply: Extract<RelayerSubmitReply, { ok: true }>,
    mode: 'live' | 'recovered',
  ): Promise<PaymentClaim | undefined> {
    const now = this.settings.now();
    let claim: PaymentClaim | undefined;
    try {
      claim = await this.payments.insertClaim(
        {
          txHash: reply.txHash,
          logIndex: reply.logIndex!,
          payer: payment.authorization.from,
          token: this.settings.usdcAddress,
          amountMicro: BigInt(payment.authorization.value),
        },
        purchase,
        // A payment settled after its caller gave up stays usable for a retry of the same resource.
        mode === 'recovered'
          ? {
              state: 'retryable',
              retryUntil: new Date(now.getTime() + this.settings.retryWindowSeconds * 1000),
            }
          : {},
      );
    } catch (error) {
      // Another channel (a checkout session, /api/verify) spent this transfer first: refused like a local claim.
      if (!(error instanceof LedgerClaimRefused) || error.failure.reason === 'claim_unavailable') throw error;
      claim = undefined;
    }
    const updated = await this.ctx.db
      .updateTable('x402_authorizations')
      .set({
        state: claim ? 'settled' : 'refused',
        reason: claim ? null : 'transfer_already_claimed',
        tx_hash: reply.txHash,
        log_index: reply.logIndex ?? null,
        claim_id: claim?.id ?? null,
        updated_at: now,
      })
      .where((eb: any) => eb.and(key))
      .where('state', '=', 'submitting')
      .returning(['state'])
      .executeTakeFirst();
    if (claim || updated) return claim;
    // The recovery pass (or a replica) settled this same authorization first: its claim is this payment's.
    const settled = (await this.ctx.db
      .selectFrom('x402_authorizations')
      .select(['claim_id', 'tx_hash'])
      .where((eb: any) => eb.and(key))
      .where('state', '=', 'settled')
      .executeTakeFirst()) as { claim_id: string | null; tx_hash: string | null } | undefined;
    if (!settled?.claim_id || settled.tx_hash !== reply.txHash) return undefined;
    const existing = (await this.ctx.db
      .selectFrom('payment_claims')
      .selectAll()
      .where('id', '=', settled.claim_id)
      .executeTakeFirst()) as PaymentClaim | undefined;
    if (!existing || mode === 'recovered') return existing;
    const reused = await this.payments.reuseClaim(existing, purchase);
    return reused.ok ? reused.claim : undefined;
  }

  private async forget(key: Record<string, unknown>): Promise<void> {
    await this.ctx.db
      .deleteFrom('x402_authorizations')
      .where((eb: any) => eb.and(key))
      .execute();
  }

  private async markRefused(key: Record<string, unknown>, reason: string): Promise<void> {
    await this.ctx.db
      .updateTable('x402_authorizations')
      .set({ state: 'refused', reason, updated_at: this.settings.now() })
      .where((eb: any) => eb.and(key))
      .where('state', '=', 'submitting')
      .execute();
  }

  /** The same authorization again: a replay is served only under the reuse rules of the purchase it paid for. */
  private async presentedBefore(
    key: Record<string, unknown>,
    payment: DecodedX402Payment,
    purchase: Purchase,
  ): Promise<X402Outcome> {
    const row = (await this.ctx.db
      .selectFrom('x402_authorizations')
      .selectAll()
      .where((eb: any) => eb.and(key))
      .executeTakeFirst()) as AuthorizationRow | undefined;
    const used = refused(
      402,
      'invalid_exact_evm_nonce_already_used',
      'this authorization has already paid for something; sign a new one',
    );
    if (!row || row.signature !== payment.signature.toLowerCase()) return used;
    if (row.state === 'refused') {
      return refused(
        402,
        (row.reason as X402Reason) ?? 'invalid_exact_evm_nonce_already_used',
        'this authorization was refused before',
      );
    }
    if (row.state === 'submitting' || !row.claim_id) {
      return refused(
        503,
        'x402_unavailable',
        'this authorization is being settled; present it again shortly',
      );
    }
    const claim = (await this.ctx.db
      .selectFrom('payment_claims')
      .selectAll()
      .where('id', '=', row.claim_id)
      .executeTakeFirst()) as PaymentClaim | undefined;
    if (!claim) return used;
    const reused = await this.payments.reuseClaim(claim, purchase);
    if (!reused.ok) return used;
    return {
      ok: true,
      claim: reused.claim,
      txHash: claim.tx_hash,
      payer: claim.payer,
      fresh: false,
      timings: { verificationMs: 0, simulationMs: 0, submissionMs: 0, inclusionMs: 0 },
    };
  }

  /** Authorizations whose caller gave up (timeout, crash) before their transfer was claimed: finish them. */
  async recoverOnce(): Promise<void> {
    this.keepOfferFresh();
    // Never race a live caller: it may wait for the inclusion plus the relayer's timeout.
    const afterMs = Math.max(
      this.settings.recoveryAfterMs,
      this.settings.inclusionWaitMs + this.settings.relayerTimeoutMs,
    );
    const stale = new Date(this.settings.now().getTime() - afterMs);
    const rows = (await this.ctx.db
      .selectFrom('x402_authorizations')
      .selectAll()
      .where('state', '=', 'submitting')
      .where('updated_at', '<', stale)
      .orderBy('updated_at')
      .limit(RECOVERY_BATCH)
      .execute()) as AuthorizationRow[];
    for (const row of rows) {
      if (this.recovery.isStopped) return;
      const key = { chain_id: row.chain_id, token: row.token, payer: row.payer, auth_nonce: row.auth_nonce };
      const authorization = this.authorizationOf(row);
      let reply: RelayerSubmitReply;
      try {
        reply = await this.relayer.submit({
          chainId: row.chain_id,
          token: this.settings.usdcAddress,
          authorization,
          signature: row.signature,
          waitForReceiptMs: 0,
        });
      } catch {
        return; // the relayer is away: try again next pass
      }
      const purchase = { ...row.purchase, priceMicro: BigInt(row.purchase.priceMicro) } as Purchase;
      if (reply.ok && reply.status === 'confirmed') {
        await this.claimTransfer(key, { authorization }, purchase, reply, 'recovered');
        this.ctx.logger.info(
          { payer: row.payer, txHash: reply.txHash },
          'x402 payment recovered and credited',
        );
      } else if (!reply.ok && RELAYER_REASONS[reply.reason][0] === 402) {
        await this.markRefused(key, RELAYER_REASONS[reply.reason][1]);
      } else {
        await this.ctx.db
          .updateTable('x402_authorizations')
          .set((eb: any) => ({ attempts: eb('attempts', '+', 1), updated_at: this.settings.now() }))
          .where((eb: any) => eb.and(key))
          .execute();
      }
    }
  }

  /** The authorization exactly as signed, from what was stored. */
  private authorizationOf(row: AuthorizationRow) {
    return {
      from: row.payer,
      to: row.to_address,
      value: row.value_micro.toString(),
      validAfter: row.valid_after.toString(),
      validBefore: row.valid_before.toString(),
      nonce: row.auth_nonce,
    };
  }
}
