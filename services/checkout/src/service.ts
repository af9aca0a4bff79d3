import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ConsumerOptions } from '@paygate/bus';
import type { Subject } from '@paygate/contracts';
import type { BackgroundTask, RunningService, ServiceContext } from '@paygate/runtime';
import { PollingLoop, startService } from '@paygate/runtime';
import { SellerAuth } from '@paygate/seller-auth';
import { migrations } from '../migrations';
import type { CheckoutConfig } from './config';
import type { CheckoutDatabase, CheckoutTrx } from './db';
import { LedgerClaims } from './matching/claims';
import { TransferMatcher } from './matching/transfers';
import { openApiRoute } from './openapi';
import { operatorRoutes } from './operator/routes';
import { ProjectionCache } from './projections/cache';
import { projectSeller, projectSkill } from './projections/registry';
import { sessionRoutes } from './sessions/routes';
import { SessionStore } from './sessions/sessions';
import { staticRoutes } from './static/routes';

/** Expires due sessions and frees lapsed amount reservations, on an interval, one pass at a time. */
class Sweeper implements BackgroundTask {
  private readonly loop: PollingLoop;

  constructor(
    private readonly ctx: ServiceContext<CheckoutDatabase>,
    private readonly store: SessionStore,
    intervalMs: number,
  ) {
    this.loop = new PollingLoop(() => this.sweep(), {
      what: 'checkout sweep',
      logger: ctx.logger,
      intervalMs,
      firstDelayMs: intervalMs,
    });
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  private async sweep(): Promise<void> {
    const inTransaction = <T>(fn: (trx: CheckoutTrx) => Promise<T>) => this.ctx.inTransaction(fn);
    // Bounded: at most a few batches per pass; the next pass continues.
    for (let i = 0; i < 10 && (await this.store.expireDue(inTransaction)) > 0; i++);
    for (let i = 0; i < 10 && (await this.store.releaseLapsedReservations(inTransaction)) > 0; i++);
  }
}

/** Keeps each consumer's handler typed by its own subject inside the mixed list. */
const consumer = <S extends Subject>(options: ConsumerOptions<S>) =>
  options as unknown as ConsumerOptions<Subject>;

export function startCheckout(config: CheckoutConfig): Promise<RunningService<CheckoutDatabase>> {
  let sellerAuth: SellerAuth | undefined;
  let store: SessionStore | undefined;
  const matcherFor = (ctx: ServiceContext<CheckoutDatabase>) =>
    new TransferMatcher(config, ctx.logger, new LedgerClaims(ctx.bus));
  let projections: ProjectionCache | undefined;
  let sessionFastPath: ((req: IncomingMessage, res: ServerResponse) => boolean) | undefined;
  const projectionsFor = (ctx: ServiceContext<CheckoutDatabase>) => {
    projections ??= new ProjectionCache(ctx.db, config.projectionCacheTtlMs);
    return projections;
  };
  return startService<CheckoutDatabase>({
    name: 'checkout',
    config,
    migrations,
    routes(app, ctx) {
      store = new SessionStore(ctx.db, config, () => ctx.relay.kick());
      sellerAuth = new SellerAuth(ctx.bus);
      staticRoutes(app);
      openApiRoute(app);
      sessionFastPath = sessionRoutes(app, ctx, config, store, sellerAuth, projectionsFor(ctx));
      operatorRoutes(app, ctx, config, matcherFor(ctx));
    },
    consumers(ctx) {
      const matcher = matcherFor(ctx);
      return [
        consumer({
          durable: 'checkout-skills',
          subject: 'skill.updated',
          handler: (trx, e) => projectSkill(trx, e.data),
          afterCommit: (e) => projectionsFor(ctx).invalidateSkill(e.data.skillId, e.data.sellerId),
        }),
        consumer({
          durable: 'checkout-sellers',
          subject: 'seller.updated',
          handler: (trx, e) => projectSeller(trx, e.data),
          afterCommit: () => projectionsFor(ctx).invalidateSellers(),
        }),
        consumer({
          durable: 'checkout-transfers',
          subject: 'transfer.observed',
          concurrency: 4,
          handler: (trx, e) => matcher.onObserved(trx, e.data),
        }),
        consumer({
          durable: 'checkout-transfer-claims',
          subject: 'transfer.claimed',
          concurrency: 4,
          handler: (trx, e) => matcher.onClaimed(trx, e.data),
        }),
        consumer({
          durable: 'checkout-reorgs',
          subject: 'transfer.reorged',
          handler: (trx, e) => matcher.onReorged(trx, e.data),
        }),
      ];
    },
    background(ctx) {
      return [new Sweeper(ctx, store ?? new SessionStore(ctx.db, config), config.sweepIntervalMs)];
    },
    fastPath: () => {
      void store?.warm();
      return sessionFastPath ?? (() => false);
    },
    async onStop() {
      sellerAuth?.close();
      await store?.close();
    },
  });
}
