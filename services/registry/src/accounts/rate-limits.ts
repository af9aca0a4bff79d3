import { checkRateLimit, rateLimitMiddleware, SharedRateLimiter } from '@paygate/http';
import type { Express, Request, Response } from 'express';
import type { Kysely } from 'kysely';
import type { RegistryConfig } from '../config';

/**
 * Sign-in's limits per client address (req.ip: the right-most untrusted X-Forwarded-For hop): every nonce is an
 * insert and every first sign-in an account, so neither is free to repeat. Shared by the replicas (Postgres).
 */
export class SignInRateLimits {
  readonly nonces: SharedRateLimiter;
  readonly signIns: SharedRateLimiter;
  readonly accounts: SharedRateLimiter;

  constructor(db: Kysely<any>, config: RegistryConfig) {
    this.nonces = new SharedRateLimiter(db, config.siweNoncesPerMinute, config.now);
    this.signIns = new SharedRateLimiter(db, config.signInsPerMinute, config.now);
    this.accounts = new SharedRateLimiter(db, config.accountsPerHour, config.now, { windowMs: 3_600_000 });
  }

  /** Ahead of the routes: nonces and sign-ins are counted before any work (429 with Retry-After). */
  mount(app: Express): void {
    app.post(
      '/api/v1/auth/siwe/nonce',
      rateLimitMiddleware(
        this.nonces,
        (req) => `siwe-nonce:${req.ip}`,
        'SIWE nonces per minute per client address',
      ),
    );
    app.post(
      '/api/v1/auth/siwe/verify',
      rateLimitMiddleware(
        this.signIns,
        (req) => `sign-in:${req.ip}`,
        'sign-ins per minute per client address',
      ),
    );
  }

  /** Counts a new account of the request's client address; throws the 429 when over the hour's limit. */
  countNewAccount(req: Request, res: Response): Promise<void> {
    return checkRateLimit(
      this.accounts,
      res,
      `account:${req.ip}`,
      'new accounts per hour per client address',
    );
  }

  get tasks() {
    return [this.nonces, this.signIns, this.accounts];
  }
}
