import { type AnyRoute, guardRoute, rateLimitMiddleware, SharedRateLimiter } from '@paygate/http';
import type { Kysely } from 'kysely';
import type { NotifierConfig } from '../config';
import type { NotifierDatabase } from '../db';
import { sellerOf } from './seller-request';

/** The routes that create a delivery by hand: each is retried for hours from the queue every seller shares. */
const MANUAL_DELIVERY_ROUTES = [
  '/api/v1/webhooks/endpoints/:id/test',
  '/api/v1/webhooks/deliveries/:id/redeliver',
];

/** A seller's test events and redeliveries per minute (every replica's, counted in Postgres). */
export function manualDeliveryLimiter(
  db: Kysely<NotifierDatabase>,
  config: NotifierConfig,
): SharedRateLimiter {
  return new SharedRateLimiter(db, config.manualDeliveriesPerMinute, config.now);
}

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
