import { timingSafeEqual } from 'node:crypto';
import { HttpError } from '@paygate/http';
import { bearerToken } from '@paygate/seller-auth';
import type { NextFunction, Request, Response } from 'express';

/** Bearer token of operator routes, compared in constant time. */
export function operatorAuth(token: string) {
  const expected = Buffer.from(token);
  return (req: Request, _res: Response, next: NextFunction) => {
    const given = Buffer.from(bearerToken(req) ?? '');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      throw new HttpError(
        401,
        'unauthorized',
        'operator token required (Authorization: Bearer <OPERATOR_TOKEN>)',
      );
    }
    next();
  };
}
