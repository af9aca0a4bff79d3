import {
  type AnyRoute,
  addressBucket,
  checkRateLimit,
  guardRoute,
  rateLimitMiddleware,
  SharedRateLimiter,
} from '@paygate/http';
import type { Request, Response } from 'express';
import type { Kysely } from 'kysely';
import type { RegistryConfig } from '../config';
import type { RegistryDatabase } from '../db';

/**
 * Per client address (req.ip, an IPv6 one by its /64), shared by the replicas: every nonce is an insert and
 * every first sign-in an account, so neither is free to repeat; nor is a payout-address challenge.
 */
export function signInRateLimits(db: Kysely<RegistryDatabase>, config: RegistryConfig) {
  const perMinute = (limit: number) => new SharedRateLimiter(db, limit, config.now);
  const accounts = new SharedRateLimiter(db, config.accountsPerHour, config.now, { windowMs: 3_600_000 });
  const limits = [
    {
      path: '/api/v1/auth/siwe/nonce',
      limiter: perMinute(config.siweNoncesPerMinute),
      key: 'siwe-nonce',
      what: 'SIWE nonces per minute per client address',
      refusal: 'rate_limited: SIWE_NONCES_PER_MINUTE nonces this minute from this address (Retry-After)',
    },
    {
      path: '/api/v1/auth/siwe/verify',
      limiter: perMinute(config.signInsPerMinute),
      key: 'sign-in',
      what: 'sign-ins per minute per client address',
      refusal:
        'rate_limited: SIGN_INS_PER_MINUTE sign-ins this minute, or ACCOUNTS_PER_HOUR new accounts this hour, from this address (Retry-After)',
    },
    // Each challenge stores a single-use nonce: not free to repeat either.
    {
      path: '/api/v1/account/payout-address/challenge',
      limiter: perMinute(config.payoutChallengesPerMinute),
      key: 'payout-challenge',
      what: 'payout-address challenges per minute per client address',
      refusal:
        'rate_limited: PAYOUT_CHALLENGES_PER_MINUTE payout-address challenges this minute from this address (Retry-After)',
    },
  ];
  return {
    tasks: [...limits.map((l) => l.limiter), accounts],
    /** On the sign-in routes and payout challenges, counted per client address (429 with Retry-After). */
    guard(routes: AnyRoute[]): void {
      for (const { path, limiter, key, what, refusal } of limits) {
        const bucket = (req: Request) => `${key}:${addressBucket(req.ip ?? '')}`;
        guardRoute(routes, 'post', path, [rateLimitMiddleware(limiter, bucket, what)], { '429': refusal });
      }
    },
    /** Counts a new account of the request's client address; throws the 429 when over the hour's limit. */
    countNewAccount: (req: Request, res: Response): Promise<void> =>
      checkRateLimit(
        accounts,
        res,
        `account:${addressBucket(req.ip ?? '')}`,
        'new accounts per hour per client address',
      ),
  };
}

export type SignInRateLimits = ReturnType<typeof signInRateLimits>;
