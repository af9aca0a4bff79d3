import { defineConsumer } from '@paygate/bus';
import { checkChainRpc, makeProvider } from '@paygate/chain';
import { SIGNATURE_RECOVERY } from '@paygate/chain/signatures';
import { type AnyRoute, mountRoutes, serveOpenApi } from '@paygate/http';
import { MAX_X402_HEADER_BYTES } from '@paygate/protocol';
import { type RunningService, startService } from '@paygate/runtime';
import { SellerAuth } from '@paygate/seller-auth';
import { migrations } from '../migrations';
import type { GatewayProxyConfig } from './config';
import type { GatewayContext } from './db';
import { mcpRoutes } from './mcp/server';
import { BlockedPayers, blockedPayerRoutes } from './payments/blocked-payers';
import { CallOutcomes } from './payments/call-outcomes';
import { UnservedCalls } from './payments/unserved';
import { jwksRoutes } from './routes/jwks';
import { gatewayOpenApi } from './routes/openapi';
import { paidCallRoute } from './routes/paid-call';
import { receiptKeyRoutes } from './routes/receipt-keys';
import { verifyRoutes } from './routes/verify';
import { applySkillUpdated } from './skills/projection';
import { createGatewayState, type GatewayState } from './state';
import { settleAwaitingCopies, x402Routes } from './x402/facilitator';

export type RunningGateway = RunningService & { state: GatewayState };

export async function startGatewayProxy(config: GatewayProxyConfig): Promise<RunningGateway> {
  const provider = makeProvider(config.rpcUrl, {
    timeoutMs: config.rpcTimeoutMs,
    chainId: config.chainId,
  });
  let state: GatewayState | undefined;
  let blockedPayers: BlockedPayers | undefined;
  let selfUrl: string | undefined;
  const need = () => {
    if (!state) throw new Error('gateway state not built yet');
    return state;
  };
  const running = await startService({
    name: 'gateway-proxy',
    config,
    migrations,
    async routes(app, ctx: GatewayContext) {
      state = await createGatewayState(ctx, config, provider);
      blockedPayers = new BlockedPayers(ctx, config.now);
      blockedPayers.attach(ctx.db);
      // ethers' JavaScript curve still recovers signers where the native binding could not load: 30 times slower.
      ctx.logger.info({ signatureRecovery: SIGNATURE_RECOVERY }, 'payment signatures recovered');
      const routes = [
        ...gatewayRoutes(
          ctx,
          state,
          need,
          () => {
            if (!selfUrl) throw new Error('the gateway is not listening yet');
            return selfUrl;
          },
          blockedPayers,
        ),
        // A seller's payers refused before anything is charged (calls built to fail, say).
        ...blockedPayerRoutes(blockedPayers, new SellerAuth(ctx.bus)),
      ];
      mountRoutes(app, routes);
      serveOpenApi(app, '/api/v1/openapi/gateway.json', gatewayOpenApi(config.publicBaseUrl, routes));
    },
    consumers: () => [
      defineConsumer({
        durable: 'gateway-skill-projection',
        subject: 'skill.updated',
        concurrency: 4,
        handler: (trx, event) => applySkillUpdated(trx, event.data),
        afterCommit: () => need().skills.invalidate(),
      }),
    ],
    // A paid call left unserved when its retry window passed is made final and the ledger told (it refunds).
    background: (ctx) => [
      ...backgroundTasks(need),
      new UnservedCalls(ctx, config.now),
      ...(blockedPayers ? [blockedPayers] : []),
    ],
    readinessChecks: () => [
      {
        name: 'chain',
        check: () => checkChainRpc(provider, config.chainId),
      },
    ],
    onStop: async () => provider.destroy(),
    // Room for an x402 payment header at its own limit beside the other headers, so one over that limit is
    // refused with a 402 and its reason rather than by Node's 431 at 16 KiB for all headers together.
    maxHeaderSize: 2 * MAX_X402_HEADER_BYTES,
  });
  selfUrl = running.url;
  return Object.assign(running, { state: need() });
}

/** Each route declares itself once: registration, validation and the OpenAPI document come from it. */
function gatewayRoutes(
  ctx: GatewayContext,
  state: GatewayState,
  need: () => GatewayState,
  selfUrl: () => string,
  blockedPayers?: BlockedPayers,
): AnyRoute[] {
  const { config } = state;
  return [
    // The paid call: every method of /api/v1/skills/<skill>/…, served on the bare request.
    paidCallRoute({
      config: state.config,
      logger: ctx.logger,
      skills: state.skills,
      limiter: state.limiter,
      payments: state.payments,
      blockedPayers,
      callOutcomes: new CallOutcomes(ctx, {
        retryWindowSeconds: config.retryWindowSeconds,
        now: config.now,
      }),
      x402: state.x402,
      settleX402: (payment, purchase, version, options) =>
        settleAwaitingCopies(need(), payment, purchase, version, options),
      tickets: state.tickets,
      receipts: state.receipts,
      signIn: state.signIn,
      forwardingKeys: state.forwardingKeys,
      forwarding: state.forwarding,
      metrics: { ...state.metrics, httpDuration: ctx.metrics.httpDuration },
    }),
    ...verifyRoutes(state),
    ...jwksRoutes(state),
    ...receiptKeyRoutes(state.receipts),
    ...x402Routes(state),
    // Every catalog endpoint as a paid MCP tool; a tool call is the paid HTTP call, sent to this gateway.
    ...mcpRoutes({
      db: ctx.db,
      skillByName: (name) => need().skills.byName(name),
      selfUrl,
      trustedProxies: config.trustedProxies,
      callTimeoutMs: config.upstreamTimeoutMs + 60_000,
      maxResultBytes: config.mcpMaxResultBytes,
      limiter: state.mcpLimiter,
      rateLimited: state.metrics.rateLimited,
    }),
  ];
}

/** The limiters, x402's recovery, the forwarding keys' subscription and the pools to sellers, stopped in order. */
function backgroundTasks(need: () => GatewayState) {
  return [
    {
      start: () => {
        for (const limiter of need().limiters) limiter.start();
      },
      stop: async () => {
        await Promise.all(need().limiters.map((limiter) => limiter.stop()));
      },
    },
    { start: () => need().x402.start(), stop: () => need().x402.stop() },
    { start: async () => undefined, stop: async () => need().forwardingKeys.close() },
    // In-flight forwards finish (each bounded by UPSTREAM_TIMEOUT_MS), then the pooled connections close.
    { start: async () => undefined, stop: () => need().forwarding.dispatcher.close() },
  ];
}
