import { type AnyRoute, guardRoute, rateLimitMiddleware, type SharedRateLimiter } from '@paygate/http';
import { sellerOf } from './seller-request';

/** The routes that create a delivery by hand: each is retried for hours from the queue every seller shares. */
const MANUAL_DELIVERY_ROUTES = [
  '/api/v1/webhooks/endpoints/:id/test',
  '/api/v1/webhooks/deliveries/:id/redeliver',
];

/** Puts the per-seller limit ahead of each route that creates a delivery by hand (429 with Retry-After). */
export function limitManualDeliveries(routes: AnyRoute[], limiter: SharedRateLimiter): void {
  for (const path of MANUAL_DELIVERY_ROUTES) {
    guardRoute(
      routes,
      'post',
      path,
      [
        rateLimitMiddleware(
          limiter,
          (req) => `manual-deliveries:${sellerOf(req)}`,
          'test events and redeliveries per minute per seller',
        ),
      ],
      {
        '429':
          'rate_limited: MANUAL_DELIVERIES_PER_MINUTE test events and redeliveries this minute (Retry-After)',
      },
    );
  }
}
