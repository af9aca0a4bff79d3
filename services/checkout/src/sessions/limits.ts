import { createHash } from 'node:crypto';
import { HttpError, type RateDecision, SharedRateLimiter } from '@paygate/http';
import { formatUsdcExact } from '@paygate/money';
import { sql } from 'kysely';
import type { CheckoutConfig } from '../config';
import type { CheckoutDb } from '../db';

/** A refusal that a later retry can pass: answered with `Retry-After` (both transports set it). */
export class RetryLaterError extends HttpError {
  constructor(
    status: 429 | 503,
    code: string,
    message: string,
    readonly retryAfterSeconds: number,
    details: { field?: string; rule?: string; [key: string]: unknown } = {},
  ) {
    super(status, code, message, { ...details, retryAfterSeconds });
  }
}

/**
 * The number of suffix values of a price (suffixes 1 .. range-1 micro-USDC): at least AMOUNT_SUFFIX_RANGE_MICRO,
 * growing with the price by AMOUNT_SUFFIX_PERCENT (a suffix stays below that share of the price) up to
 * AMOUNT_SUFFIX_MAX_RANGE_MICRO. More values per price is more sessions a price can hold at once.
 */
export function suffixRangeFor(
  config: Pick<
    CheckoutConfig,
    'amountSuffixRangeMicro' | 'amountSuffixPercent' | 'amountSuffixMaxRangeMicro'
  >,
  priceMicro: bigint,
): number {
  const scaled = (priceMicro * BigInt(config.amountSuffixPercent)) / 100n;
  const capped =
    scaled > BigInt(config.amountSuffixMaxRangeMicro) ? config.amountSuffixMaxRangeMicro : Number(scaled);
  return Math.max(config.amountSuffixRangeMicro, capped);
}

/** The largest range any price gets (bounds the price a secret key may name). */
export function largestSuffixRange(
  config: Pick<
    CheckoutConfig,
    'amountSuffixRangeMicro' | 'amountSuffixPercent' | 'amountSuffixMaxRangeMicro'
  >,
): number {
  return config.amountSuffixPercent > 0 ? config.amountSuffixMaxRangeMicro : config.amountSuffixRangeMicro;
}

/**
 * A seller's caps for a new session at this price: open sessions at once, and unpaid sessions (open, or expired
 * in their late window) among the price's amounts (a share of its suffixes). 0: no such cap
 * (MAX_OPEN_SESSIONS_PER_SELLER 0, MAX_AMOUNT_SHARE_PERCENT 100).
 */
export function sellerCaps(
  config: Pick<
    CheckoutConfig,
    | 'amountSuffixRangeMicro'
    | 'amountSuffixPercent'
    | 'amountSuffixMaxRangeMicro'
    | 'maxOpenSessionsPerSeller'
    | 'maxAmountSharePercent'
  >,
  priceMicro: bigint,
): { maxOpenSessions: number; maxUnpaidInRange: number; capacity: number } {
  const capacity = suffixRangeFor(config, priceMicro) - 1;
  const share =
    config.maxAmountSharePercent >= 100
      ? 0
      : Math.max(1, Math.floor((capacity * config.maxAmountSharePercent) / 100));
  return { maxOpenSessions: config.maxOpenSessionsPerSeller, maxUnpaidInRange: share, capacity };
}

const keyBucket = (token: string) => `key:${createHash('sha256').update(token).digest('hex').slice(0, 32)}`;
const clientBucket = (client: string) => `client:${client}`;

const secondsUntil = (now: Date, at: Date | null) =>
  Math.max(1, Math.ceil(((at?.getTime() ?? now.getTime()) - now.getTime()) / 1000));

/**
 * What bounds session creation, so no one can exhaust the unique amounts of a price (security issue, point 3):
 * - per key (`pk_` or `sk_`) and, for publishable-key requests, per client address: fixed one-minute windows
 *   counted in Postgres and shared by every replica (the gateway's limiter);
 * - per seller: at most `maxOpenSessionsPerSeller` open sessions, and at most `maxAmountSharePercent` of one
 *   price's suffixes held by its unpaid sessions (open, or expired in their late window), so one seller's
 *   flood leaves the rest of every price to the others.
 * Every refusal is a 429 with Retry-After. The seller caps are conditions of the creation statement (counted in
 * it, not locked), so concurrent requests of one seller can pass a cap by at most the creation pool's size (8
 * per replica).
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
    const byKey = await this.decide(this.perKey, keyBucket(token));
    if (!byKey.allowed) {
      throw new RetryLaterError(
        429,
        'rate_limited',
        `at most ${byKey.limit} session creations per minute per key; retry in ${byKey.retryAfterSeconds} s`,
        byKey.retryAfterSeconds,
        {
          field: 'Authorization',
          rule: `at most ${byKey.limit} sessions per minute per key`,
          limit: byKey.limit,
        },
      );
    }
    if (client === undefined) return;
    const byClient = await this.decide(this.perClient, clientBucket(client));
    if (!byClient.allowed) {
      throw new RetryLaterError(
        429,
        'rate_limited',
        `at most ${byClient.limit} session creations per minute per client address; retry in ${byClient.retryAfterSeconds} s`,
        byClient.retryAfterSeconds,
        {
          field: 'client',
          rule: `at most ${byClient.limit} sessions per minute per client address`,
          limit: byClient.limit,
        },
      );
    }
  }

  private async decide(limiter: SharedRateLimiter, bucket: string): Promise<RateDecision> {
    return limiter.tryLocal(bucket) ?? (await limiter.hit(bucket));
  }

  /**
   * Why the creation statement inserted nothing, when a seller's cap is the reason (the statement enforces the
   * caps itself, in its one round trip): 429 too_many_open_sessions | amount_share_exhausted; else returns.
   */
  async admitSeller(sellerId: string, priceMicro: bigint, priceField: 'amount' | 'skill'): Promise<void> {
    const now = this.config.now();
    const range = suffixRangeFor(this.config, priceMicro);
    const share = sellerCaps(this.config, priceMicro).maxUnpaidInRange;
    // Every amount a session of this price could take: another price's sessions inside it count too.
    const low = priceMicro + 1n;
    const high = priceMicro + BigInt(range - 1);
    const result = await sql<{
      open: string;
      oldest_open_expiry: Date | null;
      held: string;
      oldest_held_release: Date | null;
    }>`
      select
        (select count(*) from sessions where seller_id = ${sellerId} and status = 'open' and expires_at > ${now}) as open,
        (select min(expires_at) from sessions where seller_id = ${sellerId} and status = 'open' and expires_at > ${now})
          as oldest_open_expiry,
        (select count(*) from sessions where seller_id = ${sellerId} and amount_reserved and transfer_id is null
          and exact_amount_micro between ${low} and ${high}) as held,
        (select min(late_until) from sessions where seller_id = ${sellerId} and amount_reserved and transfer_id is null
          and exact_amount_micro between ${low} and ${high}) as oldest_held_release`.execute(this.db);
    const row = result.rows[0]!;
    const maxOpen = this.config.maxOpenSessionsPerSeller;
    if (maxOpen > 0 && Number(row.open) >= maxOpen) {
      const retry = secondsUntil(now, row.oldest_open_expiry);
      throw new RetryLaterError(
        429,
        'too_many_open_sessions',
        `this seller has ${row.open} open sessions, the most it may have at once (${this.config.maxOpenSessionsPerSeller}); one expires in ${retry} s`,
        retry,
        {
          field: 'Authorization',
          rule: `at most ${this.config.maxOpenSessionsPerSeller} open sessions per seller`,
        },
      );
    }
    // 0: no share (MAX_AMOUNT_SHARE_PERCENT 100; a single-seller deployment may let one seller fill a price).
    if (share > 0 && Number(row.held) >= share) {
      const retry = secondsUntil(now, row.oldest_held_release);
      throw new RetryLaterError(
        429,
        'amount_share_exhausted',
        `this seller's unpaid sessions hold ${row.held} of the ${range - 1} unique amounts of ${formatUsdcExact(priceMicro)} USDC, its share (${this.config.maxAmountSharePercent}%); the oldest is released in ${retry} s`,
        retry,
        {
          field: priceField,
          rule: `a seller's unpaid sessions may hold at most ${this.config.maxAmountSharePercent}% of a price's unique amounts`,
        },
      );
    }
  }
}
