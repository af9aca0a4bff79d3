import { CheckoutSessionSnapshot } from '@paygate/contracts';
import { SharedRateLimiter, securitySchemes } from '@paygate/http';
import type { HostResolver } from '@paygate/net';
import { type RunningService, type ServiceContext, startService } from '@paygate/runtime';
import { SellerAuth } from '@paygate/seller-auth';
import { migrations } from '../migrations';
import type { NotifierConfig } from './config';
import { notifierConsumers } from './consumers';
import type { NotifierDatabase } from './db';
import { LiveUpdates } from './live/hub';
import { WEBHOOK_DELIVERY_EVENT } from './live/protocol';
import { liveRoutes, WEBSOCKET_PROTOCOL } from './live/routes';
import { WebhookSecrets } from './sellers/secrets';
import { Delivery } from './webhooks/delivery-view';
import { WebhookDispatcher } from './webhooks/dispatcher';
import { Endpoint } from './webhooks/endpoints';
import { webhookDocuments } from './webhooks/payload';
import { webhookRoutes } from './webhooks/routes';

const OPENAPI_PATH = '/api/v1/openapi/notifier.json';

/** The OpenAPI 3.1 document's own facts; its paths are the declared routes. */
const notifierDocument = () => ({
  title: 'Paygate notifier',
  description: `Live session updates for widgets (WebSocket) and signed, retried webhooks for sellers.\n\n${WEBSOCKET_PROTOCOL}`,
  securitySchemes: { secretKey: securitySchemes.apiKey },
  schemas: { CheckoutSession: CheckoutSessionSnapshot, Delivery, WebhookEndpoint: Endpoint },
  webhooks: webhookDocuments(),
});

export interface RunningNotifier extends RunningService<NotifierDatabase> {
  dispatcher: WebhookDispatcher;
  live: LiveUpdates;
}

/** `random` (retry jitter) and `resolveHost` (DNS of webhook URLs) are the tests' stand-ins. */
export async function startNotifier(
  config: NotifierConfig,
  options: { random?: () => number; resolveHost?: HostResolver } = {},
): Promise<RunningNotifier> {
  const running = await startService({
    name: 'notifier',
    config,
    migrations,
    build(ctx: ServiceContext<NotifierDatabase>) {
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
      const manualDeliveries = new SharedRateLimiter(ctx.db, config.manualDeliveriesPerMinute, config.now);
      const deps = { auth, dispatcher, config, secrets, manualDeliveries };
      const routes = [...liveRoutes(), ...webhookRoutes(ctx, deps)];
      return {
        dispatcher,
        live,
        routes,
        openApi: { path: OPENAPI_PATH, document: notifierDocument() },
        consumers: notifierConsumers({ config, dispatcher }),
        tasks: [dispatcher, manualDeliveries],
        // Hears session changes before the first socket can connect, so no change falls between.
        attach(server) {
          live.start();
          live.attach(server);
        },
        // Upgraded sockets would keep the HTTP server from closing: they go first.
        detach: () => live.stop(),
        stop: async () => auth.close(),
      };
    },
  });
  return { ...running, dispatcher: running.parts.dispatcher, live: running.parts.live };
}
