import { HttpError } from '@paygate/http';
import type { HostResolver } from '@paygate/net';
import { type RunningService, type ServiceContext, startService } from '@paygate/runtime';
import { SellerAuth } from '@paygate/seller-auth';
import { migrations } from '../migrations';
import type { NotifierConfig } from './config';
import { notifierConsumers } from './consumers';
import type { NotifierDatabase } from './db';
import { LiveUpdates, WEBSOCKET_PATH } from './live/hub';
import { notifierOpenApiRoute } from './openapi';
import { WebhookSecrets } from './sellers/secrets';
import { WebhookDispatcher } from './webhooks/dispatcher';
import { mountWebhookRoutes } from './webhooks/routes';

export interface NotifierOptions {
  /** Jitter source for retry delays (tests make it deterministic). */
  random?: () => number;
  /** Stands in for DNS when connecting to sellers' webhook URLs (tests). */
  resolveHost?: HostResolver;
}

export interface RunningNotifier extends RunningService<NotifierDatabase> {
  dispatcher: WebhookDispatcher;
  live: LiveUpdates;
}

interface Parts {
  auth: SellerAuth;
  dispatcher: WebhookDispatcher;
  live: LiveUpdates;
}

export async function startNotifier(
  config: NotifierConfig,
  options: NotifierOptions = {},
): Promise<RunningNotifier> {
  let parts: Parts | undefined;
  // startService builds the context, then calls routes, consumers and background with it: the parts are
  // created once, on the first of those calls.
  const partsFor = (ctx: ServiceContext<NotifierDatabase>): Parts => {
    parts ??= {
      auth: new SellerAuth(ctx.bus),
      dispatcher: new WebhookDispatcher({
        db: ctx.db,
        secrets: new WebhookSecrets(ctx.bus, { timeoutMs: config.secretRequestTimeoutMs }),
        logger: ctx.logger,
        config,
        registry: ctx.metrics.registry,
        random: options.random,
        resolveHost: options.resolveHost,
      }),
      live: new LiveUpdates({
        db: ctx.db,
        bus: ctx.bus,
        logger: ctx.logger,
        config,
        registry: ctx.metrics.registry,
      }),
    };
    return parts;
  };

  const running = await startService<NotifierDatabase>({
    name: 'notifier',
    config,
    migrations,
    routes: (app, ctx) => {
      const { auth, dispatcher, live } = partsFor(ctx);
      live.start();
      app.get(WEBSOCKET_PATH, () => {
        throw new HttpError(
          426,
          'upgrade_required',
          'connect with a WebSocket client to receive session updates',
        );
      });
      mountWebhookRoutes(app, ctx, { auth, dispatcher, config });
      notifierOpenApiRoute(app);
    },
    consumers: (ctx) => notifierConsumers({ config, dispatcher: partsFor(ctx).dispatcher }),
    background: (ctx) => [partsFor(ctx).dispatcher],
  });
  const { dispatcher, live, auth } = partsFor(running.ctx);
  live.attach(running.server);

  const stopService = running.stop;
  return {
    ...running,
    dispatcher,
    live,
    async stop() {
      // Upgraded sockets would keep the HTTP server from closing: they go first.
      await live.stop();
      auth.close();
      await stopService();
    },
  };
}
