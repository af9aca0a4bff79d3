import { SharedRateLimiter } from '@paygate/http';
import { sellerDispatcher } from '@paygate/net';
import { Counter, Gauge, SecretBox } from '@paygate/runtime';
import type { JsonRpcProvider } from 'ethers';
import type { GatewayProxyConfig } from './config';
import type { GatewayContext } from './db';
import { ChainVerifier } from './payments/chain';
import { LedgerClaims } from './payments/claims';
import { PaymentService } from './payments/service';
import { FORWARD_CONNECTIONS_PER_ORIGIN, type ForwardOptions } from './proxy/forward';
import { ForwardingKeys } from './proxy/forwarding-keys';
import { RequestSigner } from './proxy/signing';
import { SkillDirectory } from './skills/projection';
import { TicketIssuer } from './tickets/issuer';
import { TicketKeyStore } from './tickets/keys';
import { ReceiptSigner } from './x402/extensions/offer-receipt';
import { SignInWithX } from './x402/extensions/sign-in-with-x';
import { X402Payments } from './x402/payments';
import { RelayerClient } from './x402/relayer-client';

/** Everything the gateway's routes and consumers share, built once per running service. */
export interface GatewayState {
  config: GatewayProxyConfig;
  ctx: GatewayContext;
  provider: JsonRpcProvider;
  skills: SkillDirectory;
  payments: PaymentService;
  /** x402 (EIP-3009) payments, settled by settlement's relayer. */
  x402: X402Payments;
  keys: TicketKeyStore;
  tickets: TicketIssuer;
  /** x402's offer-receipt: the key offers and receipts are signed with (public half at RECEIPT_KEYS_PATH). */
  receipts: ReceiptSigner;
  /** x402's sign-in-with-x: subscribers' wallet signatures (nonces in siwx_nonces). */
  signIn: SignInWithX;
  /** Paid skill URLs: per wallet (or client address) per skill per minute. */
  limiter: SharedRateLimiter;
  /** A seller's POST /api/verify, per seller per minute (beside `limiter`'s per wallet). */
  verifyLimiter: SharedRateLimiter;
  /** The x402 facilitator's routes, per seller key per minute. */
  facilitatorLimiter: SharedRateLimiter;
  /** The x402 Bazaar discovery list, per client address per minute. */
  discoveryLimiter: SharedRateLimiter;
  /** The MCP endpoint, per client address per minute. */
  mcpLimiter: SharedRateLimiter;
  /** Every limiter above and the relayer's daily budgets: started and stopped with the service. */
  limiters: SharedRateLimiter[];
  metrics: {
    accepted: Counter<'mode' | 'fresh'>;
    refused: Counter<'reason'>;
    rateLimited: Counter<string>;
    x402CopiesWaiting: Gauge<string>;
  };
  /** What every forward uses: timeout, signer, body bound, and the connection pools to sellers. */
  forwarding: ForwardOptions;
  /** Sellers' forwarding keys (what their forwarded requests are signed with), learnt from the registry. */
  forwardingKeys: ForwardingKeys;
}

export async function createGatewayState(
  ctx: GatewayContext,
  config: GatewayProxyConfig,
  provider: JsonRpcProvider,
): Promise<GatewayState> {
  const keys = new TicketKeyStore(
    ctx.db,
    config.ticketSigningKeyPem,
    new SecretBox(config.ticketKeyEncryptionKey, 'paygate-gateway-ticket-keys'),
  );
  await keys.init();
  const forwarding = forwardingOptions(config, keys);
  const { limiter, verifyLimiter, facilitatorLimiter, discoveryLimiter, mcpLimiter, relayerBudgets } =
    rateLimiters(ctx, config);
  const metrics = gatewayMetrics(ctx);
  const { payments, x402 } = paymentServices(ctx, config, provider, relayerBudgets);
  // Warm what the 402 path reads without waiting: the token's EIP-712 domain and the relayer's status.
  void x402.tokenDomain().catch(() => undefined);
  void x402.relayer.currentStatus();
  return {
    config,
    ctx,
    provider,
    skills: new SkillDirectory(ctx.db),
    payments,
    x402,
    keys,
    tickets: new TicketIssuer(keys, config.publicBaseUrl, config.ticketTtlSeconds, config.now),
    receipts: new ReceiptSigner(config.receiptSigningKey, config.publicBaseUrl, config.now),
    signIn: new SignInWithX(ctx.db, {
      origin: new URL(config.publicBaseUrl).origin,
      chainId: config.chainId,
      rpcUrl: config.rpcUrl,
      rpcTimeoutMs: config.rpcTimeoutMs,
      now: config.now,
    }),
    limiter,
    verifyLimiter,
    facilitatorLimiter,
    discoveryLimiter,
    mcpLimiter,
    limiters: [
      limiter,
      verifyLimiter,
      facilitatorLimiter,
      discoveryLimiter,
      mcpLimiter,
      relayerBudgets.perPayer,
      relayerBudgets.perSeller,
    ],
    metrics,
    forwarding,
    forwardingKeys: new ForwardingKeys(ctx.bus, { timeoutMs: config.registryTimeoutMs }),
  };
}

/** What every forward uses: the timeout, the request signer (the ticket keys), the body bound and the pools. */
function forwardingOptions(config: GatewayProxyConfig, keys: TicketKeyStore): ForwardOptions {
  return {
    timeoutMs: config.upstreamTimeoutMs,
    signer: new RequestSigner(keys, config.now),
    maxBodyBytes: config.proxyMaxBodyBytes,
    dispatcher: sellerDispatcher(
      { publicOnly: config.production },
      { connections: FORWARD_CONNECTIONS_PER_ORIGIN, connectTimeoutMs: config.upstreamTimeoutMs },
    ),
  };
}

/** The per-minute limiters of the paid URLs, /api/verify per seller, the facilitator and discovery, and the relayer's daily budgets. */
function rateLimiters(ctx: GatewayContext, config: GatewayProxyConfig) {
  // Budgets are exact (freshMs 0: every relayed payment is counted in Postgres before it is submitted).
  const day = { windowMs: 24 * 60 * 60_000, freshMs: 0 };
  return {
    limiter: new SharedRateLimiter(ctx.db, config.rateLimitPerMinute, config.now),
    verifyLimiter: new SharedRateLimiter(ctx.db, config.verifyPerSellerPerMinute, config.now),
    facilitatorLimiter: new SharedRateLimiter(ctx.db, config.x402FacilitatorPerMinute, config.now),
    discoveryLimiter: new SharedRateLimiter(ctx.db, config.discoveryPerMinute, config.now),
    mcpLimiter: new SharedRateLimiter(ctx.db, config.mcpPerMinute, config.now),
    relayerBudgets: {
      perPayer: new SharedRateLimiter(ctx.db, config.relayerDailyPerPayer, config.now, day),
      perSeller: new SharedRateLimiter(ctx.db, config.relayerDailyPerSeller, config.now, day),
    },
  };
}

/** The gateway's payment, refusal, rate-limit and x402 copy metrics, on the service's registry. */
function gatewayMetrics(ctx: GatewayContext): GatewayState['metrics'] {
  const registers = [ctx.metrics.registry];
  return {
    accepted: new Counter({
      name: 'gateway_payments_accepted_total',
      help: 'Payments accepted by mode and whether they were fresh or a reuse',
      labelNames: ['mode', 'fresh'] as const,
      registers,
    }),
    refused: new Counter({
      name: 'gateway_payments_refused_total',
      help: 'Payment proofs refused, by reason',
      labelNames: ['reason'] as const,
      registers,
    }),
    rateLimited: new Counter({
      name: 'gateway_rate_limited_total',
      help: 'Requests answered 429',
      registers,
    }),
    x402CopiesWaiting: new Gauge({
      name: 'gateway_x402_copies_waiting',
      help: 'Copies of an x402 payment waiting for the settlement of the first (on this replica or another)',
      registers,
    }),
  };
}

/** Tx-hash payments (proven on chain, claimed with the ledger) and x402 payments (settled by the relayer). */
function paymentServices(
  ctx: GatewayContext,
  config: GatewayProxyConfig,
  provider: JsonRpcProvider,
  relayerBudgets: { perPayer: SharedRateLimiter; perSeller: SharedRateLimiter },
) {
  const chain = new ChainVerifier(provider, {
    usdcAddress: config.usdcAddress,
    escrowAddress: config.escrowAddress,
    confirmations: config.confirmations,
  });
  const payments = new PaymentService(
    ctx,
    chain,
    {
      network: config.network,
      chainId: config.chainId,
      usdcAddress: config.usdcAddress,
      escrowAddress: config.escrowAddress,
      retryWindowSeconds: config.retryWindowSeconds,
      upstreamTimeoutMs: config.upstreamTimeoutMs,
      now: config.now,
    },
    new LedgerClaims(ctx.bus, ctx.logger),
  );
  const x402 = new X402Payments(
    ctx,
    provider,
    payments,
    new RelayerClient(ctx.bus, config.relayerTimeoutMs),
    {
      chainId: config.chainId,
      usdcAddress: config.usdcAddress,
      escrowAddress: config.escrowAddress,
      maxTimeoutSeconds: config.x402MaxTimeoutSeconds,
      inclusionWaitMs: config.x402InclusionWaitMs,
      retryWindowSeconds: config.retryWindowSeconds,
      relayerTimeoutMs: config.relayerTimeoutMs,
      recoveryAfterMs: config.x402RecoveryAfterMs,
      recoveryIntervalMs: config.x402RecoveryIntervalMs,
      minAmountMicro: config.x402MinAmountMicro,
      relayerBudgets,
      now: config.now,
    },
  );
  return { payments, x402 };
}
