import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { type Generated, type RawBuilder, sql } from 'kysely';
import { HttpError, HttpReason } from './errors';

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the current window ends. */
  retryAfterSeconds: number;
}

interface BucketState {
  windowStart: number;
  /** The shared count as of `syncedAt`. */
  shared: number;
  /** Hits allowed here and not yet added to the shared count. */
  pending: number;
  /** Hits whose write is under way (a flush or a hit asking Postgres): counted until the write's total is read. */
  writing: number;
  /** When the shared count was read, on the limiter's clock (the one its windows are cut on). */
  syncedAt: number;
}

const MINUTE_MS = 60_000;

/** The window a hit falls in, read once per hit from the limiter's clock. */
interface Window {
  nowMs: number;
  start: number;
  retryAfterSeconds: number;
}

/** What the limiter's raw statements run on: any service's `Kysely`, whatever its `Database` names. */
type SqlExecutor = Parameters<RawBuilder<unknown>['execute']>[0];

interface RateLimiterOptions {
  /** How often locally counted hits are added to the shared rows (ms). */
  flushIntervalMs?: number;
  /** How long a shared count read from Postgres may be trusted for local decisions (ms); 0: every hit asks Postgres. */
  freshMs?: number;
  /** The fixed window's length (default one minute); windows are cut on multiples of it since the epoch (days: UTC). */
  windowMs?: number;
}

/** The limiter's table, to extend a service's `Database` with. */
export interface RateLimitTables {
  rate_limit_windows: { bucket: string; window_start: Date; hits: number; window_seconds: Generated<number> };
}

/**
 * Fixed windows counted in Postgres (`rate_limit_windows`), shared by every replica. Below half the limit, with a
 * shared count read less than `freshMs` ago, a replica counts locally and flushes every `flushIntervalMs`; near
 * the limit every hit is an upsert whose total decides. Overshoot is bounded by what other replicas allowed
 * locally in one flush interval. Hits whose write fails stay pending.
 */
export class SharedRateLimiter {
  private readonly buckets = new Map<string, BucketState>();
  private timer: NodeJS.Timeout | undefined;
  private lastCleanup = 0;
  /** The last flush called (settled when none is under way), and how many are under way or waiting for it. */
  private flushing: Promise<void> = Promise.resolve();
  private flushesUnderWay = 0;

  readonly windowMs: number;

  constructor(
    private readonly db: SqlExecutor,
    readonly limit: number,
    private readonly now: () => Date,
    private readonly options: RateLimiterOptions = {},
  ) {
    this.windowMs = options.windowMs ?? MINUTE_MS;
    if (!Number.isInteger(this.windowMs) || this.windowMs < 1000 || this.windowMs % 1000 !== 0)
      throw new RangeError('rate limiter windowMs must be a whole number of seconds');
  }

  start(): void {
    // A tick while a flush is still under way (Postgres slow) is skipped: no queue grows behind it.
    this.timer = setInterval(
      () => this.flushesUnderWay === 0 && void this.flush().catch(() => undefined),
      this.options.flushIntervalMs ?? 100,
    );
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.flush().catch(() => undefined);
  }

  /** Counts the hit locally and decides without Postgres when the rules allow it; otherwise undefined. */
  tryLocal(bucket: string): RateDecision | undefined {
    const window = this.windowOf();
    const state = this.buckets.get(bucket);
    if (!state || state.windowStart !== window.start) return undefined;
    return this.decideLocally(state, window);
  }

  /** Counts the hit here when the shared count is fresh and it keeps this replica within half the limit. */
  private decideLocally(state: BucketState, window: Window): RateDecision | undefined {
    const age = window.nowMs - state.syncedAt;
    const fresh = age >= 0 && age < (this.options.freshMs ?? 1000);
    if (!fresh || this.countedLocally(state) + 1 > this.limit / 2) return undefined;
    state.pending += 1;
    return {
      allowed: true,
      limit: this.limit,
      remaining: this.limit - this.countedLocally(state),
      retryAfterSeconds: window.retryAfterSeconds,
    };
  }

  /** Every hit this replica knows of: the shared count read, plus its own not yet in it (pending or being written). */
  private countedLocally(state: BucketState): number {
    return state.shared + state.writing + state.pending;
  }

  async hit(bucket: string): Promise<RateDecision> {
    const window = this.windowOf();
    const state = this.stateOf(bucket, window);
    const local = this.decideLocally(state, window);
    if (local) return local;
    const carried = state.pending;
    state.pending = 0;
    state.writing += carried + 1;
    try {
      return this.decided(bucket, window, await this.add(bucket, window.start, carried + 1));
    } catch (error) {
      // Not written: the hits counted here before stay pending (this one is not decided; its caller fails).
      state.pending += carried;
      throw error;
    } finally {
      state.writing -= carried + 1;
    }
  }

  /**
   * `hit(bucket)`, then, only if allowed, `next.hit(nextBucket)` (else undefined): in one statement when both
   * limiters count every hit in Postgres (freshMs 0) on the same database.
   */
  async hitThen(
    bucket: string,
    next: SharedRateLimiter,
    nextBucket: string,
  ): Promise<[RateDecision, RateDecision | undefined]> {
    const exact = (limiter: SharedRateLimiter) => (limiter.options.freshMs ?? 1000) === 0;
    if (!exact(this) || !exact(next) || next.db !== this.db) {
      const first = await this.hit(bucket);
      return [first, first.allowed ? await next.hit(nextBucket) : undefined];
    }
    const [own, theirs] = [this.windowOf(), next.windowOf()];
    const row = (
      await sql<{ first_hits: number; next_hits: number | null }>`
        with first as (
          insert into rate_limit_windows (bucket, window_start, hits, window_seconds)
            values (${bucket}, ${new Date(own.start)}, 1, ${this.windowMs / 1000})
            on conflict (bucket, window_start) do update set hits = rate_limit_windows.hits + 1
            returning hits
        ),
        next as (
          insert into rate_limit_windows (bucket, window_start, hits, window_seconds)
            select ${nextBucket}::text, ${new Date(theirs.start)}::timestamptz, 1, ${next.windowMs / 1000}::integer
            where (select hits from first) <= ${this.limit}
            on conflict (bucket, window_start) do update set hits = rate_limit_windows.hits + 1
            returning hits
        )
        select (select hits from first) as first_hits, (select hits from next) as next_hits`.execute(this.db)
    ).rows[0]!;
    const first = this.decided(bucket, own, Number(row.first_hits));
    return [
      first,
      row.next_hits === null ? undefined : next.decided(nextBucket, theirs, Number(row.next_hits)),
    ];
  }

  /** Takes back one hit counted on `bucket` at `at` (never below zero): a hit that was not that bucket's to pay. */
  async giveBack(bucket: string, at: Date): Promise<void> {
    const atMs = at.getTime();
    const windowStart = atMs - (atMs % this.windowMs);
    await sql`
      update rate_limit_windows set hits = greatest(hits - 1, 0)
      where bucket = ${bucket} and window_start = ${new Date(windowStart)}`.execute(this.db);
    const state = this.buckets.get(bucket);
    if (state && state.windowStart === windowStart && state.shared > 0) state.shared -= 1;
  }

  private windowOf(): Window {
    const nowMs = this.now().getTime();
    const start = nowMs - (nowMs % this.windowMs);
    return {
      nowMs,
      start,
      retryAfterSeconds: Math.max(1, Math.ceil((start + this.windowMs - nowMs) / 1000)),
    };
  }

  private stateOf(bucket: string, window: Window): BucketState {
    let state = this.buckets.get(bucket);
    if (!state || state.windowStart !== window.start) {
      state = { windowStart: window.start, shared: 0, pending: 0, writing: 0, syncedAt: 0 };
      this.buckets.set(bucket, state);
    }
    return state;
  }

  /** The decision of a shared total just read, remembered as the bucket's shared count. */
  private decided(bucket: string, window: Window, total: number): RateDecision {
    const state = this.stateOf(bucket, window);
    // Writes may return out of order; a window's shared count only grows.
    state.shared = Math.max(state.shared, total);
    state.syncedAt = this.now().getTime();
    return {
      allowed: total <= this.limit,
      limit: this.limit,
      remaining: Math.max(0, this.limit - total),
      retryAfterSeconds: window.retryAfterSeconds,
    };
  }

  private async add(bucket: string, windowStart: number, hits: number): Promise<number> {
    const result = await sql<{ hits: number }>`
      insert into rate_limit_windows (bucket, window_start, hits, window_seconds)
      values (${bucket}, ${new Date(windowStart)}, ${hits}, ${this.windowMs / 1000})
      on conflict (bucket, window_start) do update set hits = rate_limit_windows.hits + excluded.hits
      returning hits`.execute(this.db);
    return Number(result.rows[0]?.hits ?? hits);
  }

  /** Adds local hits to the shared rows and forgets finished windows; one at a time (a call waits for the last). */
  flush(): Promise<void> {
    this.flushesUnderWay += 1;
    const next = this.flushing.then(() => this.flushOnce());
    this.flushing = next
      .catch(() => undefined)
      .finally(() => {
        this.flushesUnderWay -= 1;
      });
    return next;
  }

  private async flushOnce(): Promise<void> {
    const nowMs = this.now().getTime();
    const due: Array<{ bucket: string; state: BucketState; hits: number }> = [];
    for (const [bucket, state] of this.buckets) {
      if (state.pending > 0) due.push({ bucket, state, hits: state.pending });
      else if (state.writing === 0 && state.windowStart + this.windowMs < nowMs) this.buckets.delete(bucket);
    }
    if (due.length > 0) {
      // Still counted while being written; back to pending if the write fails.
      for (const { state, hits } of due) {
        state.pending -= hits;
        state.writing += hits;
      }
      const buckets = due.map((d) => d.bucket);
      const windows = due.map((d) => new Date(d.state.windowStart));
      const hits = due.map((d) => d.hits);
      try {
        const result = await sql<{ hits: number; bucket: string }>`
        insert into rate_limit_windows (bucket, window_start, hits, window_seconds)
        select *, ${this.windowMs / 1000}::int from unnest(${buckets}::text[], ${windows}::timestamptz[], ${hits}::int[])
        on conflict (bucket, window_start) do update set hits = rate_limit_windows.hits + excluded.hits
        returning bucket, hits`.execute(this.db);
        const totals = new Map(result.rows.map((row) => [row.bucket, Number(row.hits)]));
        const syncedAt = this.now().getTime();
        for (const { bucket, state } of due) {
          state.shared = Math.max(state.shared, totals.get(bucket) ?? state.shared);
          state.syncedAt = syncedAt;
        }
      } catch (error) {
        for (const { state, hits } of due) state.pending += hits;
        throw error;
      } finally {
        for (const { state, hits } of due) state.writing -= hits;
      }
    }
    if (nowMs - this.lastCleanup > MINUTE_MS) {
      this.lastCleanup = nowMs;
      // Any limiter's finished windows (five of their own lengths ago), whatever their length.
      await sql`delete from rate_limit_windows where ctid in (select ctid from rate_limit_windows
        where window_start + make_interval(secs => window_seconds * 5) < ${new Date(nowMs)} limit 5000)`.execute(
        this.db,
      );
    }
  }
}

/** Where the rate-limit headers go: an Express response, or a bare node:http one (the gateway's paid calls). */
interface RateLimitHeaderSink {
  setHeader(name: string, value: string): unknown;
}

/**
 * Counts one hit on `bucket` and, over the limit, throws the 429 (with Retry-After). `what` names what is limited,
 * for the message: "SIWE nonces per minute per client address".
 */
export async function checkRateLimit(...args: Parameters<typeof rateLimitNowOrLater>): Promise<void> {
  await rateLimitNowOrLater(...args);
}

/** checkRateLimit for a hot path: decided synchronously when this replica can, else a promise of the decision. */
export function rateLimitNowOrLater(
  limiter: SharedRateLimiter,
  res: RateLimitHeaderSink,
  bucket: string,
  what: string,
): undefined | Promise<void> {
  const local = limiter.tryLocal(bucket);
  if (local) {
    applyRateDecision(res, local, what);
    return undefined;
  }
  return limiter.hit(bucket).then((decision) => applyRateDecision(res, decision, what));
}

/** Sets the RateLimit-* headers of a decision; a refusal also sets Retry-After and throws the 429. */
function applyRateDecision(res: RateLimitHeaderSink, decision: RateDecision, what: string): void {
  res.setHeader('RateLimit-Limit', String(decision.limit));
  res.setHeader('RateLimit-Remaining', String(decision.remaining));
  if (decision.allowed) return;
  res.setHeader('Retry-After', String(decision.retryAfterSeconds));
  throw new HttpError(
    429,
    HttpReason.RateLimited,
    `at most ${decision.limit} ${what}; retry in ${decision.retryAfterSeconds} s`,
    { limit: decision.limit, retryAfterSeconds: decision.retryAfterSeconds },
  );
}

/** Express middleware form of checkRateLimit (a route's `before`, or ahead of a path). */
export function rateLimitMiddleware(
  limiter: SharedRateLimiter,
  keyOf: (req: Request) => string | undefined,
  what: string,
): RequestHandler {
  return (req: Request, res: Response, next: NextFunction) => {
    const bucket = keyOf(req);
    if (bucket === undefined) return next();
    checkRateLimit(limiter, res, bucket, what).then(() => next(), next);
  };
}
