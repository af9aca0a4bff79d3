import { createHash, timingSafeEqual } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { HttpError } from './errors';

/** The token of `Authorization: Bearer <token>`, or undefined. */
export function bearerToken(req: Request): string | undefined {
  const header = req.header('authorization');
  if (!header) return undefined;
  const match = /^Bearer\s+(\S+)$/i.exec(header.trim());
  return match?.[1];
}

/** Compares two secrets in constant time, whatever their lengths (both are hashed to 32 bytes first). */
export function constantTimeEqual(a: string, b: string): boolean {
  const left = createHash('sha256').update(a).digest();
  const right = createHash('sha256').update(b).digest();
  return timingSafeEqual(left, right);
}

/** The 401 every operator route answers when the token is missing or wrong. */
export const operatorUnauthorized = () =>
  new HttpError(401, 'unauthorized', 'operator token required (Authorization: Bearer <OPERATOR_TOKEN>)', {
    field: 'Authorization',
    rule: 'must be the operator token',
  });

/**
 * Express middleware of operator routes: `Authorization: Bearer <OPERATOR_TOKEN>`, compared in constant time.
 * An empty configured token lets nobody in (it never matches a missing header).
 */
export function operatorAuth(token: string) {
  return (req: Request, _res: Response, next: NextFunction) => {
    const given = bearerToken(req);
    if (!token || !given || !constantTimeEqual(given, token)) throw operatorUnauthorized();
    next();
  };
}
