import { consumersOf, type DeclaredConsumer } from '@paygate/bus';
import { CheckoutSessionSnapshot } from '@paygate/contracts';
import { securitySchemes } from '@paygate/http';
import { type RunningService, startService } from '@paygate/runtime';
import { SellerAuth } from '@paygate/seller-auth';
import { migrations } from '../migrations';
import type { CheckoutConfig } from './config';
import type { CheckoutDatabase } from './db';
import { LedgerClaims } from './matching/claims';
import { observeTransfer } from './matching/observe';
import { type MatchingDeps, reverseReorgedTransfer } from './matching/session-payments';
import { operatorRoutes, TransferView } from './operator/routes';
import { ProjectionCache } from './projections/cache';
import { projectSeller, projectSkill } from './projections/registry';
import { cors, corsOnError } from './sessions/cors';
import { SessionLimits } from './sessions/limits';
import { sessionRoutes } from './sessions/routes';
import { SessionStore } from './sessions/sessions';
import { Sweeper } from './sessions/sweeper';
import { staticRoutes } from './static/routes';

/** The OpenAPI 3.1 document's own facts; its paths are the declared routes (and the document route). */
const checkoutDocument = {
  title: 'Paygate checkout',
  description:
    'Checkout sessions, the polling route of the widget, and the operator resolution of transfers that matched no session. By default a session is paid by its unique exact amount (the price plus a random six-decimal suffix below one cent) to the checkout wallet all sessions share, never the agent escrow; a seller that chose deposit addresses (checkoutMatching) gets an address per session (an HD child of the checkout deposit xpub) paid at exactly the price. Live updates come over the notifier WebSocket (/api/v1/openapi/notifier.json).',
  securitySchemes: {
    publishableKey: securitySchemes.publishableKey,
    secretKey: securitySchemes.apiKey,
    operatorToken: securitySchemes.operatorToken,
  },
  schemas: { CheckoutSession: CheckoutSessionSnapshot, Transfer: TransferView },
};

/**
 * Checkout, built once: the session store and its limits, the registry projections, what matching decides with
 * (shared by the operator routes and the transfer consumers), then the routes, consumers and the sweeper.
 */
export function startCheckout(config: CheckoutConfig): Promise<RunningService<CheckoutDatabase>> {
  return startService<CheckoutDatabase>({
    name: 'checkout',
    config,
    migrations,
    build(ctx) {
      const limits = new SessionLimits(ctx.db, config);
      const store = new SessionStore(ctx, config, limits);
      const sellerAuth = new SellerAuth(ctx.bus);
      const projections = new ProjectionCache(ctx.db, config.projectionCacheTtlMs);
      const matching: MatchingDeps = { config, logger: ctx.logger, claims: new LedgerClaims(ctx.bus) };
      // Opens the session insert's own connections ahead of the first requests (best effort: a failure shows on use).
      void store.warm();
      return {
        use: [{ path: '/api/v1/checkout', handlers: [cors, corsOnError] }],
        routes: [
          ...staticRoutes(),
          ...sessionRoutes(ctx, { config, store, sellerAuth, projections, limits }),
          ...operatorRoutes(ctx, config, matching),
        ],
        openApi: { path: '/api/v1/openapi/checkout.json', document: checkoutDocument },
        consumers: checkoutConsumers(matching, projections),
        tasks: [new Sweeper(ctx.logger, store, config.sweepIntervalMs), limits],
        async stop() {
          sellerAuth.close();
          await store.close();
        },
      };
    },
  });
}

/** Checkout's projections of skills and sellers, and the transfers it matches to sessions. */
function checkoutConsumers(
  matching: MatchingDeps,
  projections: ProjectionCache,
): DeclaredConsumer<CheckoutDatabase>[] {
  const consumer = consumersOf<CheckoutDatabase>();
  return [
    consumer({
      durable: 'checkout-skills',
      subject: 'skill.updated',
      handler: (trx, e) => projectSkill(trx, e.data),
      afterCommit: (e) => projections.invalidateSkill(e.data.skillId, e.data.sellerId),
    }),
    consumer({
      durable: 'checkout-sellers',
      subject: 'seller.updated',
      handler: (trx, e) => projectSeller(trx, e.data),
      afterCommit: () => projections.invalidateSellers(),
    }),
    consumer({
      durable: 'checkout-transfers',
      subject: 'transfer.observed',
      concurrency: 4,
      handler: (trx, e) => observeTransfer(matching, trx, e.data),
    }),
    consumer({
      durable: 'checkout-reorgs',
      subject: 'transfer.reorged',
      handler: (trx, e) => reverseReorgedTransfer(matching, trx, e.data, e.id),
    }),
  ];
}
