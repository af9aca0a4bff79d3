import { createHash, timingSafeEqual } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { HttpError, HttpReason } from './errors';

const BEARER_PATTERN = /^Bearer\s+(\S+)$/i;

export function bearerTokenOf(authorization: string | undefined): string | undefined {
  if (!authorization) return undefined;
  return BEARER_PATTERN.exec(authorization.trim())?.[1];
}

export function bearerToken(req: Request): string | undefined {
  return bearerTokenOf(req.header('authorization'));
}

/** Compares two secrets in constant time, whatever their lengths (both are hashed to 32 bytes first). */
export function constantTimeEqual(a: string, b: string): boolean {
  const left = createHash('sha256').update(a).digest();
  const right = createHash('sha256').update(b).digest();
  return timingSafeEqual(left, right);
}

const operatorUnauthorized = () =>
  new HttpError(
    401,
    HttpReason.Unauthorized,
    'operator token required (Authorization: Bearer <OPERATOR_TOKEN>)',
    { field: 'Authorization', rule: 'must be the operator token' },
  );

/** Operator routes' middleware: the bearer OPERATOR_TOKEN in constant time; an empty token lets nobody in. */
export function operatorAuth(token: string) {
  return (req: Request, _res: Response, next: NextFunction) => {
    const given = bearerToken(req);
    if (!token || !given || !constantTimeEqual(given, token)) throw operatorUnauthorized();
    next();
  };
}
