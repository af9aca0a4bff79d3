import { HttpError } from '@paygate/http';
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
