import type { SharedRateLimiter } from '@paygate/http';
import type { X402Offer } from '@paygate/protocol';
import { type BackgroundTask, PollingLoop } from '@paygate/runtime';
import type { JsonRpcProvider } from 'ethers';
import type { GatewayProxyConfig } from '../../../config';
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
import { type ChainReads, LOCAL_CHECKS, READ_CHECKS, runChecks, type X402Expectation } from './verify';

export type { X402Outcome, X402Timings } from './settlement';

type X402Settings = GatewayProxyConfig & {
  relayerBudgets: { perPayer: SharedRateLimiter; perSeller: SharedRateLimiter };
};

interface VerifyOptions {
  /** The facilitator's /verify: also the balance and the nonce (settling has the relayer's simulation and reuse rules). */
  verifyOnly: boolean;
  maxTimeoutSeconds?: number;
}

const RECOVERY_BATCH = 50;
/** Payment identifiers are kept this long: a purchase is retried within minutes, an id is never reused later. */
const PAYMENT_ID_KEEP_MS = 24 * 3600_000;
const PAYMENT_ID_SWEEP_BATCH = 500;

export interface SettleOptions {
  /** When not Paygate's own (the facilitator's sellers choose theirs). */
  maxTimeoutSeconds?: number;
  fingerprint?: string;
}
const { chainUnavailable, relayerUnavailable } = PAYGATE_REASONS;

/** x402 `exact` (EIP-3009): checked, claimed once across replicas, submitted by the relayer, claimed as a payment. */
export class X402Payments implements BackgroundTask {
  private eip712: { name: string; version: string } | undefined;
  private readonly recovered = new WeakMap<DecodedX402Payment, boolean>();
  private readonly recovery: PollingLoop;
  readonly authorizations: X402Authorizations;
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
      intervalMs: settings.x402RecoveryIntervalMs,
    });
  }

  start(): void {
    this.keepOfferFresh();
    this.recovery.start();
  }

  /** The token domain and relayer status, read ahead of the 402 path (first from start, before listening). */
  private keepOfferFresh(): void {
    this.knownTokenDomain();
    this.relayer.knownAvailable();
  }

  stop(): Promise<void> {
    return this.recovery.stop();
  }

  async tokenDomain(): Promise<{ name: string; version: string }> {
    this.eip712 ??= await readTokenDomain(this.provider, this.settings.usdcAddress);
    return this.eip712;
  }

  /** The domain if already read (the 402 path never waits for the chain). */
  knownTokenDomain(): { name: string; version: string } | undefined {
    if (!this.eip712) this.tokenDomain().catch(() => undefined);
    return this.eip712;
  }

  /** The payer when the EOA signature is theirs (nobody spends another's quota), else undefined. */
  walletOf(payment: DecodedX402Payment): string | undefined {
    const eip712 = this.knownTokenDomain();
    if (!eip712) return undefined;
    return this.recoveredPayer(payment, this.terms(0n, eip712))
      ? payment.authorization.from.toLowerCase()
      : undefined;
  }

  private recoveredPayer(payment: DecodedX402Payment, expected: TokenDomain): boolean {
    let known = this.recovered.get(payment);
    if (known === undefined) {
      known = signedByPayer(expected, payment.authorization, payment.signature);
      this.recovered.set(payment, known);
    }
    return known;
  }

  offered(): boolean {
    return this.knownTokenDomain() !== undefined && this.relayer.knownAvailable() === true;
  }

  offer(input: { url: string; description: string; priceMicro: bigint }): X402Offer | undefined {
    const eip712 = this.knownTokenDomain();
    if (!eip712) return undefined;
    // Below the minimum the relayer's gas is not worth it: the buyer pays with X-402-Payment instead.
    if (input.priceMicro < this.settings.x402MinAmountMicro) return undefined;
    const resource = { url: input.url, description: input.description, mimeType: 'application/json' };
    return { ...this.terms(input.priceMicro, eip712), resource };
  }

  /** What Paygate's own configuration asks of a payment (never the client's `accepted` copy). */
  private terms(amountMicro: bigint, eip712: TokenDomain['eip712'], maxTimeoutSeconds?: number) {
    const { chainId, usdcAddress: asset, escrowAddress: payTo, x402MaxTimeoutSeconds } = this.settings;
    return {
      chainId,
      asset,
      payTo,
      amountMicro,
      eip712,
      maxTimeoutSeconds: maxTimeoutSeconds ?? x402MaxTimeoutSeconds,
    };
  }

  /** Every named check of verify.ts short of submitting (the facilitator's /verify; settling starts with it). */
  async verify(
    payment: DecodedX402Payment,
    priceMicro: bigint,
    options: VerifyOptions,
  ): Promise<Refused | undefined> {
    const rpcDown = refused(503, chainUnavailable, 'the chain RPC did not answer; retry shortly');
    let expected: X402Expectation;
    try {
      const terms = this.terms(priceMicro, await this.tokenDomain(), options.maxTimeoutSeconds);
      expected = { ...terms, minAmountMicro: this.settings.x402MinAmountMicro };
    } catch {
      return rpcDown;
    }
    const input = {
      payment,
      expected,
      nowSeconds: Math.floor(this.settings.now().getTime() / 1000),
      verifyOnly: options.verifyOnly,
    };
    const local = await runChecks(LOCAL_CHECKS, { ...input, reads: this.chainReads(undefined, undefined) });
    if (local) return refused(402, local.reason, local.message);
    // Its reads start side by side with the local ECDSA; the checks still decide in their order.
    const balance = options.verifyOnly
      ? usdcBalance(this.provider, this.settings.usdcAddress, payment.authorization.from)
      : undefined;
    const used = options.verifyOnly ? this.alreadyUsed(payment) : undefined;
    const onNode =
      this.recovered.get(payment) === true
        ? undefined
        : recoveredOnNode(this.provider, expected, payment.authorization, payment.signature).catch(
            () => null,
          );
    balance?.catch(() => undefined);
    used?.catch(() => undefined);
    try {
      const refusal = await runChecks(READ_CHECKS, {
        ...input,
        reads: this.chainReads(balance, used, onNode),
      });
      return refusal && refused(402, refusal.reason, refusal.message);
    } catch {
      return rpcDown;
    }
  }

  /** The node's ecrecover only saves the local check: it accepts no signature `@x402/evm`'s rules refuse. */
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

  /** Presented here before or used on chain (authorizationState), both read at once. */
  async alreadyUsed(payment: DecodedX402Payment): Promise<boolean> {
    const a = payment.authorization;
    const onChain = authorizationUsedOnChain(this.provider, this.settings.usdcAddress, a);
    onChain.catch(() => undefined);
    if (await this.authorizations.find(this.authorizations.keyOf(a))) return true;
    return onChain;
  }

  /** Counts against both daily budgets before submitting; the seller's is given back on a payer-side failure. */
  private async overRelayerBudget(payer: string, sellerId: string): Promise<Refused | undefined> {
    const { perPayer, perSeller } = this.settings.relayerBudgets;
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

  async settle(
    payment: DecodedX402Payment,
    purchase: Purchase,
    version: 1 | 2,
    options: SettleOptions = {},
  ): Promise<X402Outcome> {
    const started = performance.now();
    const notValid = await this.verify(payment, purchase.priceMicro, {
      verifyOnly: false,
      maxTimeoutSeconds: options.maxTimeoutSeconds,
    });
    if (notValid) return notValid;
    const key = this.authorizations.keyOf(payment.authorization);
    // The signature proves the payer: another authorization under a bound id is never submitted.
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
    const countedAt = this.settings.now();
    const overBudget = await this.overRelayerBudget(payment.authorization.from, purchase.sellerId).catch(
      async (error: unknown) => {
        await this.authorizations.forget(claimed);
        throw error;
      },
    );
    if (overBudget) {
      await this.authorizations.forget(claimed);
      return overBudget;
    }
    const outcome = await this.settlement.submit(claimed, payment, purchase, performance.now() - started);
    // The seller's budget counts sponsorship only: a refusal for the payer's doing (402) is given back to the seller.
    if (!outcome.ok && outcome.status === 402) {
      await this.settings.relayerBudgets.perSeller
        .giveBack(`relayer-seller:${purchase.sellerId}`, countedAt)
        .catch(() => undefined);
    }
    return outcome;
  }

  /** How long a `submitting` authorization may be held: never race a live caller (inclusion + relayer's timeout). */
  staleAfterMs(): number {
    return Math.max(
      this.settings.x402RecoveryAfterMs,
      this.settings.x402InclusionWaitMs + this.settings.relayerTimeoutMs,
    );
  }

  /** Moved no money: refused, or never claimed though bound long ago (a bound-just-now one is being presented). */
  private async paidNothing(key: AuthorizationKey, boundAt: Date): Promise<boolean> {
    const row = await this.authorizations.find(key);
    if (row) return row.state === 'refused';
    return boundAt.getTime() < this.settings.now().getTime() - this.staleAfterMs();
  }

  async recoverOnce(): Promise<void> {
    this.keepOfferFresh();
    await this.paymentIds.forgetOlderThan(
      new Date(this.settings.now().getTime() - PAYMENT_ID_KEEP_MS),
      PAYMENT_ID_SWEEP_BATCH,
    );
    const rows = await this.authorizations.takeOverStale(
      new Date(this.settings.now().getTime() - this.staleAfterMs()),
      RECOVERY_BATCH,
    );
    for (const row of rows) {
      if (this.recovery.isStopped) return;
      if (!(await this.settlement.recover(row))) return;
    }
  }
}
