import { bearerToken, HttpError, operatorAuth, securitySchemes } from '@paygate/http';
import { credentialOf } from '@paygate/seller-auth';
import type { NextFunction, Request, Response } from 'express';
import { findSellerByApiKey, findSellerById, type SellerRow, touchApiKey } from '../accounts/repository';
import type { RegistryContext } from '../context';
import { refusal } from '../errors';
import { RegistryReason } from '../reasons';
import { verifySessionToken } from './sessions';

declare global {
  namespace Express {
    interface Request {
      account?: SellerRow;
    }
  }
}

/** Management routes take the session token or the API key (sk_…): a seller can automate what the dashboard does. */
function requireSeller(rc: RegistryContext) {
  return async (req: Request, _res: Response, next: NextFunction) => {
    const token = bearerToken(req);
    if (!token) {
      const message = 'Authorization: Bearer <session token or sk_… API key> is required';
      throw refusal(401, RegistryReason.MissingCredentials, message, 'is required', 'Authorization');
    }
    let seller: SellerRow | 'signed_out' | undefined;
    if (token.startsWith('sk_')) {
      if (token.length > 200) throw new HttpError(401, RegistryReason.InvalidApiKey, 'API key is malformed');
      seller = await sellerOfApiKey(rc, token);
      if (!seller)
        throw new HttpError(401, RegistryReason.UnknownApiKey, 'API key is not valid (unknown or rotated)');
    } else {
      seller = await sellerOfSession(rc, token);
      const why =
        seller === 'signed_out' ? 'this session was signed out' : 'session token is invalid or expired';
      if (seller === 'signed_out' || !seller)
        throw new HttpError(401, RegistryReason.InvalidSession, `${why}; sign in again`);
    }
    req.account = seller;
    req.credential = credentialOf(token);
    next();
  };
}

/** The seller of an sk_ key, its use recorded (bookkeeping: a failed write must not refuse a valid key). */
export async function sellerOfApiKey(rc: RegistryContext, apiKey: string): Promise<SellerRow | undefined> {
  const now = rc.config.now();
  const seller = await findSellerByApiKey(rc.ctx.db, apiKey, now);
  if (seller)
    await touchApiKey(rc.ctx.db, seller, apiKey, now).catch((error) =>
      rc.ctx.logger.warn({ err: error, sellerId: seller.id }, 'could not record API key use'),
    );
  return seller;
}

/** The seller of a session token (undefined when invalid, 'signed_out' after a sign-out), for HTTP and RPC alike. */
export async function sellerOfSession(
  rc: RegistryContext,
  token: string,
): Promise<SellerRow | 'signed_out' | undefined> {
  if (token.length > 4096) return undefined;
  const session = await verifySessionToken(token, rc.config.sessionSecret, rc.config.now());
  if (!session) return undefined;
  const seller = await findSellerById(rc.ctx.db, session.sellerId);
  const revokedAt = seller?.sessions_revoked_at;
  if (revokedAt && session.issuedAtMs <= new Date(revokedAt).getTime()) return 'signed_out';
  return seller;
}

export function currentSeller(req: Request): SellerRow {
  if (!req.account) throw new HttpError(401, RegistryReason.MissingCredentials, 'not authenticated');
  return req.account;
}

/** The auth of the management routes: the API key or the session token (either scheme of the document). */
export function sellerRouteAuth(rc: RegistryContext) {
  return { schemes: ['apiKey', 'session'], middleware: requireSeller(rc) };
}

/** Operator routes: Authorization: Bearer <OPERATOR_TOKEN>, compared in constant time. */
export function operatorRouteAuth(rc: RegistryContext) {
  return { scheme: 'operator', middleware: operatorAuth(rc.config.operatorToken) };
}

/** The security schemes the routes' auth names, as the OpenAPI document describes them. */
export const registrySecuritySchemes = {
  apiKey: securitySchemes.apiKey,
  session: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'JWT',
    description: 'dashboard session token from /api/v1/auth/siwe/verify',
  },
  operator: securitySchemes.operatorToken,
};
