import { defineConsumer } from '@paygate/bus';
import { checkChainRpc, makeProvider } from '@paygate/chain';
import { SIGNATURE_RECOVERY } from '@paygate/chain/signatures';
import { type AnyRoute, SharedRateLimiter } from '@paygate/http';
import { sellerDispatcher } from '@paygate/net';
import { MAX_X402_HEADER_BYTES } from '@paygate/protocol';
import { type RunningService, SecretBox, type ServiceParts, startService } from '@paygate/runtime';
import { SellerAuth } from '@paygate/seller-auth';
import type { JsonRpcProvider } from 'ethers';
import { migrations } from '../migrations';
import type { GatewayProxyConfig } from './config';
import type { GatewayContext, GatewayDatabase } from './db';
import { NotListeningError } from './errors';
import { mcpRoutes } from './mcp/server';
import { gatewayMetrics } from './metrics';
import { BlockedPayers, blockedPayerRoutes } from './payments/blocked-payers';
import { CallOutcomes } from './payments/call-outcomes';
import { PaymentService } from './payments/service';
import { UnservedCalls } from './payments/unserved';
import { FORWARD_CONNECTIONS_PER_ORIGIN, type ForwardOptions } from './proxy/forward';
import { ForwardingKeys } from './proxy/forwarding-keys';
import { RequestSigner } from './proxy/signing';
import { keyRoutes } from './routes/keys';
import { gatewayOpenApi } from './routes/openapi';
import { paidCallRoute } from './routes/paid-call';
import { verifyRoutes } from './routes/verify';
import { applySkillUpdated, SkillDirectory } from './skills/projection';
import { TicketIssuer } from './tickets/issuer';
import { TicketKeyStore } from './tickets/keys';
import { discoveryRoute } from './x402/extensions/bazaar-discovery';
import { ReceiptSigner } from './x402/extensions/offer-receipt';
import { SignInWithX } from './x402/extensions/sign-in-with-x';
import { x402Routes } from './x402/facilitator/routes';
import { X402Payments } from './x402/mechanisms/exact-evm/payments';
import { RelayerClient } from './x402/mechanisms/exact-evm/relayer-client';
import { ChainVerifier } from './x402/mechanisms/tx-hash/chain';
import { SettlementCopies } from './x402/server/copies';

interface GatewayHandles {
  skills: SkillDirectory;
  payments: PaymentService;
  x402: X402Payments;
  keys: TicketKeyStore;
  forwarding: ForwardOptions;
}

type GatewayParts = ServiceParts<GatewayDatabase> & GatewayHandles;

export type RunningGateway = RunningService<GatewayDatabase, GatewayParts> & { state: GatewayHandles };

export async function startGatewayProxy(config: GatewayProxyConfig): Promise<RunningGateway> {
  const provider = makeProvider(config.rpcUrl, { timeoutMs: config.rpcTimeoutMs, chainId: config.chainId });
  // The MCP tools call this gateway's own paid route, at the address it listens on.
  let selfUrl: string | undefined;
  const running = await startService<GatewayDatabase, GatewayParts>({
    name: 'gateway-proxy',
    config,
    migrations,
    // Room for an x402 header at its own limit, so one over it is a 402 with its reason rather than Node's 431.
    maxHeaderSize: 2 * MAX_X402_HEADER_BYTES,
    build: (ctx) =>
      buildGateway(ctx, config, provider, () => {
        if (!selfUrl) throw new NotListeningError('the gateway is not listening yet');
        return selfUrl;
      }),
  });
  selfUrl = running.url;
  return Object.assign(running, { state: running.parts });
}

/** The relayer's budgets are exact: every relayed payment is counted in Postgres before it is submitted. */
function sharedLimiters(ctx: GatewayContext, config: GatewayProxyConfig) {
  const perMinute = (limit: number) => new SharedRateLimiter(ctx.db, limit, config.now);
  const perDay = (limit: number) =>
    new SharedRateLimiter(ctx.db, limit, config.now, { windowMs: 24 * 60 * 60_000, freshMs: 0 });
  return {
    paidCall: perMinute(config.rateLimitPerMinute),
    verify: perMinute(config.verifyPerSellerPerMinute),
    facilitator: perMinute(config.x402FacilitatorPerMinute),
    discovery: perMinute(config.discoveryPerMinute),
    mcp: perMinute(config.mcpPerMinute),
    relayerPerPayer: perDay(config.relayerDailyPerPayer),
    relayerPerSeller: perDay(config.relayerDailyPerSeller),
  };
}

/** The gateway's stores, clients and payment paths, before any route. */
async function buildParts(ctx: GatewayContext, config: GatewayProxyConfig, provider: JsonRpcProvider) {
  ctx.logger.info({ signatureRecovery: SIGNATURE_RECOVERY }, 'payment signatures recovered');
  const metrics = gatewayMetrics(ctx);
  const sellerAuth = new SellerAuth(ctx.bus);
  const skills = new SkillDirectory(ctx.db);
  const keys = new TicketKeyStore(
    ctx.db,
    config.ticketSigningKeyPem,
    new SecretBox(config.ticketKeyEncryptionKey, 'paygate-gateway-ticket-keys'),
  );
  await keys.init();
  const forwarding: ForwardOptions = {
    timeoutMs: config.upstreamTimeoutMs,
    signer: new RequestSigner(keys, config.now),
    maxBodyBytes: config.proxyMaxBodyBytes,
    dispatcher: sellerDispatcher(
      { publicOnly: config.production },
      { connections: FORWARD_CONNECTIONS_PER_ORIGIN, connectTimeoutMs: config.upstreamTimeoutMs },
    ),
  };
  const forwardingKeys = new ForwardingKeys(ctx.bus, { timeoutMs: config.registryTimeoutMs });
  const limiters = sharedLimiters(ctx, config);
  const payments = new PaymentService(ctx, new ChainVerifier(provider, config), config);
  const x402 = new X402Payments(
    ctx,
    provider,
    payments,
    new RelayerClient(ctx.bus, config.relayerTimeoutMs),
    {
      ...config,
      relayerBudgets: { perPayer: limiters.relayerPerPayer, perSeller: limiters.relayerPerSeller },
    },
  );
  const blockedPayers = new BlockedPayers(ctx, config.now);
  return {
    metrics,
    sellerAuth,
    skills,
    keys,
    forwarding,
    forwardingKeys,
    limiters,
    payments,
    x402,
    blockedPayers,
  };
}

type BuiltParts = Awaited<ReturnType<typeof buildParts>>;

async function buildGateway(
  ctx: GatewayContext,
  config: GatewayProxyConfig,
  provider: JsonRpcProvider,
  selfUrl: () => string,
): Promise<GatewayParts> {
  const parts = await buildParts(ctx, config, provider);
  const { skills, payments, x402, keys, forwarding } = parts;
  return {
    routes: gatewayRoutes(ctx, config, parts, selfUrl),
    openApi: { path: '/api/v1/openapi/gateway.json', document: gatewayOpenApi(config.publicBaseUrl) },
    consumers: [
      defineConsumer<'skill.updated', GatewayDatabase>({
        durable: 'gateway-skill-projection',
        subject: 'skill.updated',
        concurrency: 4,
        handler: (trx, event) => applySkillUpdated(trx, event.data),
        afterCommit: () => skills.invalidate(),
      }),
    ],
    tasks: [
      ...Object.values(parts.limiters),
      x402,
      { start: () => undefined, stop: async () => parts.forwardingKeys.close() },
      { start: () => undefined, stop: () => forwarding.dispatcher.close() },
      new UnservedCalls(ctx, config),
      parts.blockedPayers,
    ],
    readinessChecks: [{ name: 'chain', check: () => checkChainRpc(provider, config.chainId) }],
    stop: async () => provider.destroy(),
    skills,
    payments,
    x402,
    keys,
    forwarding,
  };
}

/** Every route group, each given only what it uses. */
function gatewayRoutes(
  ctx: GatewayContext,
  config: GatewayProxyConfig,
  built: BuiltParts,
  selfUrl: () => string,
): AnyRoute[] {
  const { metrics, sellerAuth, skills, payments, x402, limiters, blockedPayers } = built;
  const copies = new SettlementCopies({ x402, config, copiesWaiting: metrics.x402CopiesWaiting });
  const receipts = new ReceiptSigner(config.receiptSigningKey, config.publicBaseUrl, config.now);
  const signIn = new SignInWithX(ctx.db, { ...config, origin: new URL(config.publicBaseUrl).origin });
  const limiter = limiters.paidCall;
  return [
    paidCallRoute({
      config,
      logger: ctx.logger,
      skills,
      limiter,
      payments,
      blockedPayers,
      callOutcomes: new CallOutcomes(ctx, config),
      x402,
      copies,
      tickets: new TicketIssuer(built.keys, config.publicBaseUrl, config.ticketTtlSeconds, config.now),
      receipts,
      signIn,
      forwardingKeys: built.forwardingKeys,
      forwarding: built.forwarding,
      metrics: { ...metrics, httpDuration: ctx.metrics.httpDuration },
    }),
    ...verifyRoutes({
      config,
      sellerAuth,
      limiter,
      verifyLimiter: limiters.verify,
      payments,
      signIn,
      metrics,
    }),
    ...keyRoutes(built.keys, receipts),
    ...x402Routes({ config, sellerAuth, limiter: limiters.facilitator, x402, payments, copies }),
    discoveryRoute({ config, db: ctx.db, limiter: limiters.discovery, x402 }),
    ...mcpRoutes({
      db: ctx.db,
      chain: { chainId: config.chainId, usdcAddress: config.usdcAddress },
      publicBaseUrl: config.publicBaseUrl,
      skillByName: (name) => skills.byName(name),
      selfUrl,
      trustedProxies: config.trustedProxies,
      callTimeoutMs: config.upstreamTimeoutMs + 60_000,
      maxResultBytes: config.mcpMaxResultBytes,
      limiter: limiters.mcp,
      rateLimited: metrics.rateLimited,
    }),
    ...blockedPayerRoutes(blockedPayers, sellerAuth),
  ];
}
