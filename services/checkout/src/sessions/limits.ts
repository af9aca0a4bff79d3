import { createHash } from 'node:crypto';
import { addressBucket, SharedRateLimiter } from '@paygate/http';
import { sql } from 'kysely';
import type { CheckoutConfig } from '../config';
import type { CheckoutDb } from '../db';
import { RetryLaterError } from '../errors';
import { CheckoutReason } from '../reasons';

const keyBucket = (token: string) => `key:${createHash('sha256').update(token).digest('hex').slice(0, 32)}`;
const clientBucket = (client: string) => `client:${addressBucket(client)}`;

const secondsUntil = (now: Date, at: Date | null) =>
  Math.max(1, Math.ceil(((at?.getTime() ?? now.getTime()) - now.getTime()) / 1000));

/**
 * Bounds on session creation (docs/security.md, attack 3): per key and per client per minute, shared by replicas,
 * and open sessions per seller (counted in the creation statement, so passable by at most its pool size).
 */
export class SessionLimits {
  private readonly perKey: SharedRateLimiter;
  private readonly perClient: SharedRateLimiter;

  constructor(
    private readonly db: CheckoutDb,
    private readonly config: CheckoutConfig,
  ) {
    this.perKey = new SharedRateLimiter(db, config.sessionRateLimitPerKey, config.now);
    this.perClient = new SharedRateLimiter(db, config.sessionRateLimitPerClient, config.now);
  }

  start(): void {
    this.perKey.start();
    this.perClient.start();
  }

  async stop(): Promise<void> {
    await Promise.all([this.perKey.stop(), this.perClient.stop()]);
  }

  /** Counts the request against its key and (publishable key) its client; a 429 when over either limit. */
  async admitRequest(token: string, client: string | undefined): Promise<void> {
    await this.admit(this.perKey, keyBucket(token), 'Authorization', 'key');
    if (client !== undefined)
      await this.admit(this.perClient, clientBucket(client), 'client', 'client address');
  }

  private async admit(limiter: SharedRateLimiter, bucket: string, field: string, per: string): Promise<void> {
    const decision = limiter.tryLocal(bucket) ?? (await limiter.hit(bucket));
    if (decision.allowed) return;
    throw new RetryLaterError(
      429,
      CheckoutReason.RateLimited,
      `at most ${decision.limit} session creations per minute per ${per}; retry in ${decision.retryAfterSeconds} s`,
      decision.retryAfterSeconds,
      { field, rule: `at most ${decision.limit} sessions per minute per ${per}`, limit: decision.limit },
    );
  }

  /** 429 too_many_open_sessions when the seller's cap is why the creation statement inserted nothing. */
  async admitSeller(sellerId: string): Promise<void> {
    const now = this.config.now();
    const maxOpen = this.config.maxOpenSessionsPerSeller;
    if (maxOpen === 0) return;
    const result = await sql<{ open: string; oldest_open_expiry: Date | null }>`
      select count(*) as open, min(expires_at) as oldest_open_expiry
      from sessions where seller_id = ${sellerId} and status = 'open' and expires_at > ${now}`.execute(
      this.db,
    );
    const row = result.rows[0]!;
    if (Number(row.open) < maxOpen) return;
    const retry = secondsUntil(now, row.oldest_open_expiry);
    throw new RetryLaterError(
      429,
      CheckoutReason.TooManyOpenSessions,
      `this seller has ${row.open} open sessions, the most it may have at once (${maxOpen}); one expires in ${retry} s`,
      retry,
      { field: 'Authorization', rule: `at most ${maxOpen} open sessions per seller` },
    );
  }
}
