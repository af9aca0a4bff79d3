import { bearerTokenOf, HttpError } from '@paygate/http';
import { credentialOf, requireWalletSession, type SellerAuth } from '@paygate/seller-auth';
import type { Request } from 'express';

/** The seller the request's secret key authenticated (the webhook routes are the seller's own). */
export function sellerOf(req: Pick<Request, 'seller'>): string {
  if (!req.seller) throw new HttpError(401, 'unauthorized', 'seller authentication is required');
  return req.seller.sellerId;
}

/**
 * Where events go (an endpoint's URL, events, on or off, its secret) changes only with the account wallet's
 * session, as the account's webhook URL does at the registry: a leaked sk_ key must not redirect or silence them.
 */
export function requireWalletSessionFor(
  req: { header(name: string): string | undefined },
  action: string,
): void {
  const token = bearerTokenOf(req.header('authorization'));
  requireWalletSession(token ? credentialOf(token) : undefined, action);
}

/** How every webhook route authenticates: the seller's secret key or the wallet's session. */
export function secretKeyAuth(auth: SellerAuth) {
  return { scheme: 'secretKey', middleware: auth.middleware() };
}
