import { HttpError, rateLimitMiddleware, type SharedRateLimiter } from '@paygate/http';
import type { SellerAuth } from '@paygate/seller-auth';
import type { Request } from 'express';

/** The seller the request's secret key authenticated (the webhook routes are the seller's own). */
export function sellerOf(req: Pick<Request, 'seller'>): string {
  if (!req.seller) throw new HttpError(401, 'unauthorized', 'seller authentication is required');
  return req.seller.sellerId;
}

/** How every webhook route authenticates: the seller's secret key or the wallet's session. */
export function secretKeyAuth(auth: SellerAuth) {
  return { scheme: 'secretKey', middleware: auth.middleware() };
}

/** A seller's test events and redeliveries: each is retried for hours from the queue every seller shares. */
export function manualDeliveryLimit(limiter: SharedRateLimiter) {
  const perSeller = 'test events and redeliveries per minute per seller';
  return {
    before: [rateLimitMiddleware(limiter, (req) => `manual-deliveries:${sellerOf(req)}`, perSeller)],
    errors: {
      '429':
        'rate_limited: MANUAL_DELIVERIES_PER_MINUTE test events and redeliveries this minute (Retry-After)',
    },
  };
}
