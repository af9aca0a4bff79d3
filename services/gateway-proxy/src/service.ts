import { defineConsumer } from '@paygate/bus';
import { checkChainRpc, makeProvider } from '@paygate/chain';
import { SIGNATURE_RECOVERY } from '@paygate/chain/signatures';
import { SharedRateLimiter } from '@paygate/http';
import { sellerDispatcher } from '@paygate/net';
import { MAX_X402_HEADER_BYTES } from '@paygate/protocol';
import { type RunningService, SecretBox, type ServiceParts, startService } from '@paygate/runtime';
import { SellerAuth } from '@paygate/seller-auth';
import { migrations } from '../migrations';
import type { GatewayProxyConfig } from './config';
import type { GatewayDatabase } from './db';
import { NotListeningError } from './errors';
import { mcpRoutes } from './mcp/server';
import { gatewayMetrics } from './metrics';
import { BlockedPayers, blockedPayerRoutes } from './payments/blocked-payers';
import { CallOutcomes } from './payments/call-outcomes';
import { LedgerClaims } from './payments/claims';
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
    async build(ctx) {
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

      // The relayer's budgets are exact: every relayed payment is counted in Postgres before it is submitted.
      const perMinute = (limit: number) => new SharedRateLimiter(ctx.db, limit, config.now);
      const perDay = (limit: number) =>
        new SharedRateLimiter(ctx.db, limit, config.now, { windowMs: 24 * 60 * 60_000, freshMs: 0 });
      const limiter = perMinute(config.rateLimitPerMinute);
      const verifyLimiter = perMinute(config.verifyPerSellerPerMinute);
      const facilitatorLimiter = perMinute(config.x402FacilitatorPerMinute);
      const discoveryLimiter = perMinute(config.discoveryPerMinute);
      const mcpLimiter = perMinute(config.mcpPerMinute);
      const perPayer = perDay(config.relayerDailyPerPayer);
      const perSeller = perDay(config.relayerDailyPerSeller);
      const limiters = [
        limiter,
        verifyLimiter,
        facilitatorLimiter,
        discoveryLimiter,
        mcpLimiter,
        perPayer,
        perSeller,
      ];

      const payments = new PaymentService(
        ctx,
        new ChainVerifier(provider, config),
        config,
        new LedgerClaims(ctx.bus, ctx.logger),
      );
      const x402 = new X402Payments(
        ctx,
        provider,
        payments,
        new RelayerClient(ctx.bus, config.relayerTimeoutMs),
        { ...config, relayerBudgets: { perPayer, perSeller } },
      );
      // Warm what the 402 path reads without waiting: the token's EIP-712 domain and the relayer's status.
      void x402.tokenDomain().catch(() => undefined);
      void x402.relayer.currentStatus();
      const copies = new SettlementCopies({ x402, config, copiesWaiting: metrics.x402CopiesWaiting });
      const receipts = new ReceiptSigner(config.receiptSigningKey, config.publicBaseUrl, config.now);
      const signIn = new SignInWithX(ctx.db, { ...config, origin: new URL(config.publicBaseUrl).origin });
      const blockedPayers = new BlockedPayers(ctx, config.now);

      const routes = [
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
          tickets: new TicketIssuer(keys, config.publicBaseUrl, config.ticketTtlSeconds, config.now),
          receipts,
          signIn,
          forwardingKeys,
          forwarding,
          metrics: { ...metrics, httpDuration: ctx.metrics.httpDuration },
        }),
        ...verifyRoutes({ config, sellerAuth, limiter, verifyLimiter, payments, signIn, metrics }),
        ...keyRoutes(keys, receipts),
        ...x402Routes({
          config,
          sellerAuth,
          limiter: facilitatorLimiter,
          x402,
          payments,
          copies,
        }),
        discoveryRoute({ config, db: ctx.db, limiter: discoveryLimiter, x402 }),
        ...mcpRoutes({
          db: ctx.db,
          chain: { chainId: config.chainId, usdcAddress: config.usdcAddress },
          publicBaseUrl: config.publicBaseUrl,
          skillByName: (name) => skills.byName(name),
          selfUrl: () => {
            if (!selfUrl) throw new NotListeningError('the gateway is not listening yet');
            return selfUrl;
          },
          trustedProxies: config.trustedProxies,
          callTimeoutMs: config.upstreamTimeoutMs + 60_000,
          maxResultBytes: config.mcpMaxResultBytes,
          limiter: mcpLimiter,
          rateLimited: metrics.rateLimited,
        }),
        ...blockedPayerRoutes(blockedPayers, sellerAuth),
      ];

      return {
        routes,
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
          ...limiters,
          x402,
          { start: () => undefined, stop: async () => forwardingKeys.close() },
          { start: () => undefined, stop: () => forwarding.dispatcher.close() },
          new UnservedCalls(ctx, config),
          blockedPayers,
        ],
        readinessChecks: [{ name: 'chain', check: () => checkChainRpc(provider, config.chainId) }],
        stop: async () => provider.destroy(),
        skills,
        payments,
        x402,
        keys,
        forwarding,
      };
    },
  });
  selfUrl = running.url;
  return Object.assign(running, { state: running.parts });
}
