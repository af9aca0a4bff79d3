import type { SharedRateLimiter } from '@paygate/http';
import type { X402Offer } from '@paygate/protocol';
import { type BackgroundTask, PollingLoop } from '@paygate/runtime';
import type { JsonRpcProvider } from 'ethers';
import type { GatewayContext } from '../../../db';
import type { PaymentService, Purchase } from '../../../payments/service';
import { PAYGATE_REASONS, UPSTREAM_REASONS } from '../../../reasons';
import { X402PaymentIds } from '../../extensions/payment-identifier';
import type { DecodedX402Payment } from '../../protocol';
import { type AuthorizationKey, X402Authorizations } from './authorizations';
import {
  authorizationUsedOnChain,
  readTokenDomain,
  recoveredOnNode,
  signedByPayer,
  signedOnChain,
  type TokenDomain,
  usdcBalance,
} from './evm-reads';
import type { RelayerClient } from './relayer-client';
import { type Refused, refused, type X402Outcome, X402Settlement } from './settlement';
import { type ChainReads, runLocalChecks, runReadChecks, type X402Expectation } from './verify';

export type { X402Outcome, X402Timings } from './settlement';

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

const RECOVERY_BATCH = 50;
/** Payment identifiers are kept this long: a purchase is retried within minutes, an id is never reused later. */
const PAYMENT_ID_KEEP_MS = 24 * 3600_000;
const PAYMENT_ID_SWEEP_BATCH = 500;

/** How a settlement is asked for besides the payment: the facilitator's bound, and the request an id names. */
export interface SettleOptions {
  /** The requirements' maxTimeoutSeconds when not Paygate's own (the facilitator's sellers choose theirs). */
  maxTimeoutSeconds?: number;
  /**
   * The request this payment pays for (requestFingerprint): with the payload's payment identifier, the same id for
   * the same request is one purchase, for another request a conflict. Without it the identifier is not used.
   */
  fingerprint?: string;
}
const { chainUnavailable, relayerUnavailable } = PAYGATE_REASONS;

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
  /** Postgres's record of every authorization presented (the facilitator's copies wait on it too). */
  readonly authorizations: X402Authorizations;
  /** x402's payment-identifier extension: each payer's ids, bound to the request and authorization they bought. */
  readonly paymentIds: X402PaymentIds;
  private readonly settlement: X402Settlement;

  constructor(
    ctx: GatewayContext,
    private readonly provider: JsonRpcProvider,
    payments: PaymentService,
    readonly relayer: RelayerClient,
    readonly settings: X402Settings,
  ) {
    this.authorizations = new X402Authorizations(ctx.db, settings, settings.now);
    this.paymentIds = new X402PaymentIds(ctx.db, settings.now);
    this.settlement = new X402Settlement(ctx.logger, payments, relayer, this.authorizations, {
      ...settings,
      staleAfterMs: this.staleAfterMs(),
    });
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
    this.eip712 ??= await readTokenDomain(this.provider, this.settings.usdcAddress);
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
  private recoveredPayer(payment: DecodedX402Payment, expected: TokenDomain): boolean {
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

  /** Every named check of verify.ts short of submitting (the facilitator's /verify; settling starts with it). */
  async verify(
    payment: DecodedX402Payment,
    priceMicro: bigint,
    options: VerifyOptions = { checkBalance: true },
  ): Promise<Refused | undefined> {
    const rpcDown = refused(503, chainUnavailable, 'the chain RPC did not answer; retry shortly');
    let expected: X402Expectation;
    try {
      expected = await this.expectation(priceMicro, options.maxTimeoutSeconds);
    } catch {
      return rpcDown;
    }
    const input = {
      payment,
      expected,
      nowSeconds: Math.floor(this.settings.now().getTime() / 1000),
      checkBalance: options.checkBalance,
      refuseUsed: options.refuseUsed === true,
    };
    const local = await runLocalChecks({ ...input, reads: this.chainReads(undefined, undefined) });
    if (local) return refused(402, local.reason, local.message);
    // A payment that passed the local checks: its reads (the balance; whether it was used, in Postgres and on the
    // token) all start now, side by side, and the signature's local ECDSA runs while they are in flight. The
    // checks still decide in their order (signature, balance, nonce): the first refusal answers.
    const balance = options.checkBalance
      ? usdcBalance(this.provider, this.settings.usdcAddress, payment.authorization.from)
      : undefined;
    const used = options.refuseUsed ? this.alreadyUsed(payment) : undefined;
    // The signature, by the node's ecrecover beside those reads (unless this payment's already recovered here).
    const onNode =
      this.recovered.get(payment) === true
        ? undefined
        : recoveredOnNode(this.provider, expected, payment.authorization, payment.signature).catch(
            () => null,
          );
    balance?.catch(() => undefined);
    used?.catch(() => undefined);
    try {
      const refusal = await runReadChecks({ ...input, reads: this.chainReads(balance, used, onNode) });
      return refusal && refused(402, refusal.reason, refusal.message);
    } catch {
      return rpcDown;
    }
  }

  /**
   * The reads of runReadChecks, from the promises already started when given. The signature is the payer's when
   * the node's ecrecover says so; otherwise it is checked here (local ECDSA, then a contract wallet's ERC-1271 by
   * `@x402/evm`'s rules): the node's answer saves the local check, it accepts no signature those rules refuse.
   */
  private chainReads(
    balance: Promise<bigint> | undefined,
    used: Promise<boolean> | undefined,
    onNode?: Promise<string | null>,
  ): ChainReads {
    return {
      signedByPayer: async (payment, expected) =>
        (onNode !== undefined &&
          (await onNode)?.toLowerCase() === payment.authorization.from.toLowerCase()) ||
        this.recoveredPayer(payment, expected) ||
        signedOnChain(this.provider, expected, payment.authorization, payment.signature),
      balanceOf: (payer) => balance ?? usdcBalance(this.provider, this.settings.usdcAddress, payer),
      alreadyUsed: (payment) => used ?? this.alreadyUsed(payment),
    };
  }

  /**
   * Presented here before (any state) or used on chain (by anyone): EIP-3009's authorizationState. Both are read
   * at once; presented here answers without waiting for the token.
   */
  async alreadyUsed(payment: DecodedX402Payment): Promise<boolean> {
    const a = payment.authorization;
    const onChain = authorizationUsedOnChain(this.provider, this.settings.usdcAddress, a);
    onChain.catch(() => undefined);
    if (await this.authorizations.presented(this.authorizations.keyOf(a))) return true;
    return onChain;
  }

  /**
   * Counts a fresh authorization against the payer's and the seller's relayer budgets of the UTC day; the
   * refusal when either is spent. Counted before submitting, so a refused or failed submission counts on the
   * payer's; the seller's is given back when the payer's submission fails (settle).
   */
  private async overRelayerBudget(payer: string, sellerId: string): Promise<Refused | undefined> {
    const { perPayer, perSeller } = this.settings.relayerBudgets;
    // The seller's budget counts only what the payer's allowed (one statement for both).
    const [byPayer, bySeller] = await perPayer.hitThen(
      `relayer-payer:${payer.toLowerCase()}`,
      perSeller,
      `relayer-seller:${sellerId}`,
    );
    const [decision, whose] = !byPayer.allowed ? [byPayer, 'payer wallet'] : [bySeller!, 'seller'];
    if (decision.allowed) return undefined;
    return {
      ok: false,
      status: 429,
      reason: PAYGATE_REASONS.relayerDailyLimit,
      message: `Paygate relays at most ${decision.limit} x402 payments per day per ${whose}; retry in ${decision.retryAfterSeconds} s, or pay with X-402-Payment (a USDC transfer you send yourself)`,
      retryAfterSeconds: decision.retryAfterSeconds,
    };
  }

  /** Verifies, claims the authorization for the purchase, has it submitted and waits for its inclusion. */
  async settle(
    payment: DecodedX402Payment,
    purchase: Purchase,
    version: 1 | 2,
    options: SettleOptions = {},
  ): Promise<X402Outcome> {
    const started = performance.now();
    const notValid = await this.verify(payment, purchase.priceMicro, {
      checkBalance: false,
      maxTimeoutSeconds: options.maxTimeoutSeconds,
    });
    if (notValid) return notValid;
    const key = this.authorizations.keyOf(payment.authorization);
    // The payer is proven by the signature just checked: its id names its purchase, whichever authorization
    // carries it now. Another authorization under a bound id is never submitted: nothing more is charged.
    if (payment.paymentId && options.fingerprint) {
      const binding = await this.paymentIds.bind(
        { payer: payment.authorization.from, id: payment.paymentId, fingerprint: options.fingerprint },
        key,
        (bound, boundAt) => this.paidNothing(bound, boundAt),
      );
      if (binding.kind === 'conflict') {
        return refused(
          409,
          PAYGATE_REASONS.paymentIdConflict,
          `payment identifier ${payment.paymentId} was used for another request (method, URL, body or price); use a new id for a new request`,
        );
      }
      if (binding.key.auth_nonce !== key.auth_nonce) {
        const answer = await this.settlement.presentedBefore(binding.key, null, purchase);
        // Served already: said so (never a 402, which would have a client sign again), nothing charged.
        if (!answer.ok && answer.reason === UPSTREAM_REASONS.nonceAlreadyUsed) {
          return refused(
            409,
            PAYGATE_REASONS.paymentIdServed,
            `the purchase of payment identifier ${payment.paymentId} was served already, and Paygate keeps no copy of its answer; nothing more was charged. Use a new id for a new purchase`,
          );
        }
        return answer;
      }
    }
    if (!(await this.relayer.available())) {
      return refused(
        503,
        relayerUnavailable,
        'the relayer cannot settle x402 payments right now; pay with X-402-Payment',
      );
    }
    const claimed = await this.authorizations.claim(payment, purchase, version);
    if (!claimed) return this.settlement.presentedBefore(key, payment.signature, purchase);
    // Over budget (or not counted): nothing is submitted, and the same authorization may come back.
    const countedAt = this.settings.now();
    let overBudget: Refused | undefined;
    try {
      overBudget = await this.overRelayerBudget(payment.authorization.from, purchase.sellerId);
    } catch (error) {
      await this.authorizations.forget(claimed);
      throw error;
    }
    if (overBudget) {
      await this.authorizations.forget(claimed);
      return overBudget;
    }
    const outcome = await this.settlement.submit(claimed, payment, purchase, performance.now() - started);
    // The seller's budget counts sponsorship only: a submission refused or reverted for the payer's doing (402)
    // is given back to the seller and stays on the payer's own budget. A lost give-back only over-counts.
    if (!outcome.ok && outcome.status === 402) {
      await this.settings.relayerBudgets.perSeller
        .giveBack(`relayer-seller:${purchase.sellerId}`, countedAt)
        .catch(() => undefined);
    }
    return outcome;
  }

  /** How long a `submitting` authorization may be held: never race a live caller (inclusion + relayer's timeout). */
  private staleAfterMs(): number {
    return Math.max(
      this.settings.recoveryAfterMs,
      this.settings.inclusionWaitMs + this.settings.relayerTimeoutMs,
    );
  }

  /**
   * An authorization that moved no money: refused, or never claimed though its id was bound long ago (a process
   * that died between the two). One bound just now and not claimed yet is being presented: it is not replaced.
   */
  private async paidNothing(key: AuthorizationKey, boundAt: Date): Promise<boolean> {
    const row = await this.authorizations.find(key);
    if (row) return row.state === 'refused';
    return boundAt.getTime() < this.settings.now().getTime() - this.staleAfterMs();
  }

  /** Authorizations whose caller gave up (timeout, crash) before their transfer was claimed: finish them. */
  async recoverOnce(): Promise<void> {
    this.keepOfferFresh();
    const afterMs = this.staleAfterMs();
    await this.paymentIds.forgetOlderThan(
      new Date(this.settings.now().getTime() - PAYMENT_ID_KEEP_MS),
      PAYMENT_ID_SWEEP_BATCH,
    );
    const rows = await this.authorizations.takeOverStale(
      new Date(this.settings.now().getTime() - afterMs),
      RECOVERY_BATCH,
    );
    for (const row of rows) {
      if (this.recovery.isStopped) return;
      // The relayer is away: try again next pass.
      if (!(await this.settlement.recover(row))) return;
    }
  }
}
