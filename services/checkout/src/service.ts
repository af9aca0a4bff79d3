import { type DeclaredConsumer, defineConsumer } from '@paygate/bus';
import { CheckoutSessionSnapshot } from '@paygate/contracts';
import { mountRoutes, openApiRoute, securitySchemes } from '@paygate/http';
import type { BackgroundTask, RunningService, ServiceContext } from '@paygate/runtime';
import { PolledTask, PollingLoop, startService } from '@paygate/runtime';
import { SellerAuth } from '@paygate/seller-auth';
import { migrations } from '../migrations';
import type { CheckoutConfig } from './config';
import type { CheckoutDatabase, CheckoutTrx } from './db';
import { LedgerClaims } from './matching/claims';
import { TransferMatcher } from './matching/transfers';
import { operatorRoutes, TransferView } from './operator/routes';
import { ProjectionCache } from './projections/cache';
import { projectSeller, projectSkill } from './projections/registry';
import { cors, corsOnError } from './sessions/cors';
import { SessionLimits } from './sessions/limits';
import { sessionRoutes } from './sessions/routes';
import { SessionStore } from './sessions/sessions';
import { staticRoutes } from './static/routes';

/** Expires due sessions and frees the amounts of sessions past their late window, on an interval, one pass at a time. */
class Sweeper extends PolledTask implements BackgroundTask {
  protected readonly loop: PollingLoop;

  constructor(
    private readonly ctx: ServiceContext<CheckoutDatabase>,
    private readonly store: SessionStore,
    intervalMs: number,
  ) {
    super();
    this.loop = new PollingLoop(() => this.sweep(), {
      what: 'checkout sweep',
      logger: ctx.logger,
      intervalMs,
      firstDelayMs: intervalMs,
    });
  }

  private async sweep(): Promise<void> {
    const inTransaction = <T>(fn: (trx: CheckoutTrx) => Promise<T>) => this.ctx.inTransaction(fn);
    // Bounded: at most a few batches per pass; the next pass continues.
    for (let i = 0; i < 10 && (await this.store.expireDue(inTransaction)) > 0; i++);
    for (let i = 0; i < 10 && (await this.store.releaseLapsedReservations(inTransaction)) > 0; i++);
  }
}

export const OPENAPI_PATH = '/api/v1/openapi/checkout.json';

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

export function startCheckout(config: CheckoutConfig): Promise<RunningService<CheckoutDatabase>> {
  let sellerAuth: SellerAuth | undefined;
  let store: SessionStore | undefined;
  let limits: SessionLimits | undefined;
  const matcherFor = (ctx: ServiceContext<CheckoutDatabase>) =>
    new TransferMatcher(config, ctx.logger, new LedgerClaims(ctx.bus));
  let projections: ProjectionCache | undefined;
  const projectionsFor = (ctx: ServiceContext<CheckoutDatabase>) => {
    projections ??= new ProjectionCache(ctx.db, config.projectionCacheTtlMs);
    return projections;
  };
  return startService<CheckoutDatabase>({
    name: 'checkout',
    config,
    migrations,
    routes(app, ctx) {
      limits = new SessionLimits(ctx.db, config);
      store = new SessionStore(ctx.db, config, () => ctx.relay.kick(), limits, ctx.logger);
      sellerAuth = new SellerAuth(ctx.bus);
      const sessions = sessionRoutes(ctx, config, store, sellerAuth, projectionsFor(ctx), limits);
      void store.warm();
      const routes = [...staticRoutes(), ...sessions, ...operatorRoutes(ctx, config, matcherFor(ctx))];
      app.use('/api/v1/checkout', cors, corsOnError);
      mountRoutes(app, [...routes, openApiRoute(OPENAPI_PATH, checkoutDocument, routes)]);
    },
    consumers: (ctx) => checkoutConsumers(matcherFor(ctx), () => projectionsFor(ctx)),
    background(ctx) {
      const limiter = limits ?? new SessionLimits(ctx.db, config);
      return [
        new Sweeper(ctx, store ?? new SessionStore(ctx.db, config), config.sweepIntervalMs),
        { start: () => limiter.start(), stop: () => limiter.stop() },
      ];
    },
    async onStop() {
      sellerAuth?.close();
      await store?.close();
    },
  });
}

/** Checkout's projections of skills and sellers, and the transfers it matches to sessions. */
function checkoutConsumers(matcher: TransferMatcher, projections: () => ProjectionCache): DeclaredConsumer[] {
  return [
    defineConsumer({
      durable: 'checkout-skills',
      subject: 'skill.updated',
      handler: (trx, e) => projectSkill(trx, e.data),
      afterCommit: (e) => projections().invalidateSkill(e.data.skillId, e.data.sellerId),
    }),
    defineConsumer({
      durable: 'checkout-sellers',
      subject: 'seller.updated',
      handler: (trx, e) => projectSeller(trx, e.data),
      afterCommit: () => projections().invalidateSellers(),
    }),
    defineConsumer({
      durable: 'checkout-transfers',
      subject: 'transfer.observed',
      concurrency: 4,
      handler: (trx, e) => matcher.onObserved(trx, e.data),
    }),
    defineConsumer({
      durable: 'checkout-transfer-claims',
      subject: 'transfer.claimed',
      concurrency: 4,
      handler: (trx, e) => matcher.onClaimed(trx, e.data),
    }),
    defineConsumer({
      durable: 'checkout-reorgs',
      subject: 'transfer.reorged',
      handler: (trx, e) => matcher.onReorged(trx, e.data, e.id),
    }),
  ];
}
