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
 * Sign-in's limits per client address (req.ip: the right-most untrusted X-Forwarded-For hop; an IPv6 one by its /64): every nonce is an
 * insert and every first sign-in an account, so neither is free to repeat; nor is a payout-address challenge. Shared by the replicas (Postgres).
 */
export class SignInRateLimits {
  readonly nonces: SharedRateLimiter;
  readonly signIns: SharedRateLimiter;
  readonly accounts: SharedRateLimiter;
  readonly payoutChallenges: SharedRateLimiter;

  constructor(db: Kysely<RegistryDatabase>, config: RegistryConfig) {
    this.nonces = new SharedRateLimiter(db, config.siweNoncesPerMinute, config.now);
    this.signIns = new SharedRateLimiter(db, config.signInsPerMinute, config.now);
    this.accounts = new SharedRateLimiter(db, config.accountsPerHour, config.now, { windowMs: 3_600_000 });
    this.payoutChallenges = new SharedRateLimiter(db, config.payoutChallengesPerMinute, config.now);
  }

  /** On the sign-in routes: nonces and sign-ins are counted per client address (429 with Retry-After). */
  guard(routes: AnyRoute[]): void {
    guardRoute(
      routes,
      'post',
      '/api/v1/auth/siwe/nonce',
      [
        rateLimitMiddleware(
          this.nonces,
          (req) => `siwe-nonce:${addressBucket(req.ip ?? '')}`,
          'SIWE nonces per minute per client address',
        ),
      ],
      { '429': 'rate_limited: SIWE_NONCES_PER_MINUTE nonces this minute from this address (Retry-After)' },
    );
    guardRoute(
      routes,
      'post',
      '/api/v1/auth/siwe/verify',
      [
        rateLimitMiddleware(
          this.signIns,
          (req) => `sign-in:${addressBucket(req.ip ?? '')}`,
          'sign-ins per minute per client address',
        ),
      ],
      {
        '429':
          'rate_limited: SIGN_INS_PER_MINUTE sign-ins this minute, or ACCOUNTS_PER_HOUR new accounts this hour, from this address (Retry-After)',
      },
    );
    // Each challenge stores a single-use nonce: not free to repeat either (docs/security.md, attack 6).
    guardRoute(
      routes,
      'post',
      '/api/v1/account/payout-address/challenge',
      [
        rateLimitMiddleware(
          this.payoutChallenges,
          (req) => `payout-challenge:${addressBucket(req.ip ?? '')}`,
          'payout-address challenges per minute per client address',
        ),
      ],
      {
        '429':
          'rate_limited: PAYOUT_CHALLENGES_PER_MINUTE payout-address challenges this minute from this address (Retry-After)',
      },
    );
  }

  /** Counts a new account of the request's client address; throws the 429 when over the hour's limit. */
  countNewAccount(req: Request, res: Response): Promise<void> {
    return checkRateLimit(
      this.accounts,
      res,
      `account:${addressBucket(req.ip ?? '')}`,
      'new accounts per hour per client address',
    );
  }

  get tasks() {
    return [this.nonces, this.signIns, this.accounts, this.payoutChallenges];
  }
}
