import { CheckoutSessionSnapshot } from '@paygate/contracts';
import { mountRoutes, openApiRoute, type SharedRateLimiter, securitySchemes } from '@paygate/http';
import type { HostResolver } from '@paygate/net';
import { type RunningService, type ServiceContext, startService } from '@paygate/runtime';
import { SellerAuth } from '@paygate/seller-auth';
import type { Express } from 'express';
import { migrations } from '../migrations';
import type { NotifierConfig } from './config';
import { notifierConsumers } from './consumers';
import type { NotifierDatabase } from './db';
import { LiveUpdates } from './live/hub';
import { WEBHOOK_DELIVERY_EVENT } from './live/protocol';
import { liveRoutes, WEBSOCKET_PROTOCOL } from './live/routes';
import { WebhookSecrets } from './sellers/secrets';
import { WebhookDispatcher } from './webhooks/dispatcher';
import { Endpoint } from './webhooks/endpoints';
import { limitManualDeliveries, manualDeliveryLimiter } from './webhooks/manual-deliveries';
import { webhookDocuments } from './webhooks/payload';
import { Delivery, webhookRoutes } from './webhooks/routes';

const OPENAPI_PATH = '/api/v1/openapi/notifier.json';

interface NotifierOptions {
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
  secrets: WebhookSecrets;
  /** A seller's test events and redeliveries per minute (every replica's, counted in Postgres). */
  manualDeliveries: SharedRateLimiter;
}

export async function startNotifier(
  config: NotifierConfig,
  options: NotifierOptions = {},
): Promise<RunningNotifier> {
  let parts: Parts | undefined;
  // startService builds the context, then calls routes, consumers and background with it: the parts are
  // created once, on the first of those calls.
  const partsFor = (ctx: ServiceContext<NotifierDatabase>): Parts => {
    parts ??= notifierParts(ctx, config, options);
    return parts;
  };

  const running = await startService<NotifierDatabase>({
    name: 'notifier',
    config,
    migrations,
    routes: (app, ctx) => mountNotifierRoutes(app, ctx, config, partsFor(ctx)),
    consumers: (ctx) => notifierConsumers({ config, dispatcher: partsFor(ctx).dispatcher }),
    background: (ctx) => [partsFor(ctx).dispatcher, partsFor(ctx).manualDeliveries],
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

/** The notifier's parts, built once from its context: seller auth, live updates, webhook secrets and dispatcher. */
function notifierParts(
  ctx: ServiceContext<NotifierDatabase>,
  config: NotifierConfig,
  options: NotifierOptions,
): Parts {
  const auth = new SellerAuth(ctx.bus);
  const live = new LiveUpdates({
    db: ctx.db,
    bus: ctx.bus,
    logger: ctx.logger,
    config,
    registry: ctx.metrics.registry,
    auth,
  });
  const secrets = new WebhookSecrets(ctx.bus, { timeoutMs: config.secretRequestTimeoutMs });
  const dispatcher = new WebhookDispatcher({
    db: ctx.db,
    secrets,
    logger: ctx.logger,
    config,
    registry: ctx.metrics.registry,
    random: options.random,
    resolveHost: options.resolveHost,
    // The seller's open dashboards on this replica see the attempt at once (others on their next poll).
    onAttempt: (sellerId, deliveryId, attemptedAt) =>
      live.publishToSeller(sellerId, {
        type: 'seller_event',
        eventId: deliveryId,
        eventType: WEBHOOK_DELIVERY_EVENT,
        occurredAt: attemptedAt.toISOString(),
      }),
  });
  const manualDeliveries = manualDeliveryLimiter(ctx.db, config);
  return { auth, dispatcher, live, secrets, manualDeliveries };
}

/** Starts live updates and mounts the live and webhook routes with their OpenAPI document. */
function mountNotifierRoutes(
  app: Express,
  ctx: ServiceContext<NotifierDatabase>,
  config: NotifierConfig,
  { auth, dispatcher, live, secrets, manualDeliveries }: Parts,
): void {
  live.start();
  // Each route declares itself once: registration, validation and the OpenAPI document come from it.
  const routes = [...liveRoutes(), ...webhookRoutes(ctx, { auth, dispatcher, config, secrets })];
  limitManualDeliveries(routes, manualDeliveries);
  const document = openApiRoute(
    OPENAPI_PATH,
    {
      title: 'Paygate notifier',
      description: `Live session updates for widgets (WebSocket) and signed, retried webhooks for sellers.\n\n${WEBSOCKET_PROTOCOL}`,
      securitySchemes: { secretKey: securitySchemes.apiKey },
      schemas: { CheckoutSession: CheckoutSessionSnapshot, Delivery, WebhookEndpoint: Endpoint },
      webhooks: webhookDocuments(),
    },
    routes,
  );
  mountRoutes(app, [...routes, document]);
}
