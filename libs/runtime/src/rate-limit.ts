import { type Kysely, sql } from 'kysely';

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
  /** When the shared count was read, on the limiter's clock (the one its windows are cut on). */
  syncedAt: number;
}

const WINDOW_MS = 60_000;

/**
 * Fixed one-minute windows counted in Postgres (a `rate_limit_windows (bucket, window_start, hits)` table in the
 * service's schema), shared by every replica of the service (gateway-proxy's paid calls, checkout's session
 * creation). To keep Postgres off
 * the hot path, a replica that saw the shared count less than `freshMs` ago and is below half the limit
 * counts locally and adds its hits to the shared row every `flushIntervalMs`; near the limit every hit is
 * an atomic upsert whose returned total decides. Overshoot across replicas is bounded by what the others
 * allowed locally in one flush interval while below half the limit. Hits whose write fails stay pending and go
 * with the next write. One clock (`now`) cuts the windows and ages the shared count.
 */
export class SharedRateLimiter {
  private readonly buckets = new Map<string, BucketState>();
  private timer: NodeJS.Timeout | undefined;
  private lastCleanup = 0;

  constructor(
    private readonly db: Kysely<any>,
    readonly limit: number,
    private readonly now: () => Date,
    private readonly options: { flushIntervalMs?: number; freshMs?: number } = {},
  ) {}

  start(): void {
    this.timer = setInterval(
      () => void this.flush().catch(() => undefined),
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
    const nowMs = this.now().getTime();
    const windowStart = nowMs - (nowMs % WINDOW_MS);
    const state = this.buckets.get(bucket);
    if (!state || state.windowStart !== windowStart) return undefined;
    if (!this.isFresh(state, nowMs)) return undefined;
    if (state.shared + state.pending + 1 > this.limit / 2) return undefined;
    state.pending += 1;
    return {
      allowed: true,
      limit: this.limit,
      remaining: this.limit - state.shared - state.pending,
      retryAfterSeconds: Math.max(1, Math.ceil((windowStart + WINDOW_MS - nowMs) / 1000)),
    };
  }

  private isFresh(state: BucketState, nowMs: number): boolean {
    const age = nowMs - state.syncedAt;
    return age >= 0 && age < (this.options.freshMs ?? 1000);
  }

  async hit(bucket: string): Promise<RateDecision> {
    const nowMs = this.now().getTime();
    const windowStart = nowMs - (nowMs % WINDOW_MS);
    const retryAfterSeconds = Math.max(1, Math.ceil((windowStart + WINDOW_MS - nowMs) / 1000));
    let state = this.buckets.get(bucket);
    if (!state || state.windowStart !== windowStart) {
      state = { windowStart, shared: 0, pending: 0, syncedAt: 0 };
      this.buckets.set(bucket, state);
    }
    if (this.isFresh(state, nowMs) && state.shared + state.pending + 1 <= this.limit / 2) {
      state.pending += 1;
      return {
        allowed: true,
        limit: this.limit,
        remaining: this.limit - state.shared - state.pending,
        retryAfterSeconds,
      };
    }
    const carried = state.pending;
    state.pending = 0;
    let total: number;
    try {
      total = await this.add(bucket, windowStart, carried + 1);
    } catch (error) {
      // Not written: the hits counted here before stay pending (this one is not decided; its caller fails).
      state.pending += carried;
      throw error;
    }
    state.shared = total;
    state.syncedAt = this.now().getTime();
    return {
      allowed: total <= this.limit,
      limit: this.limit,
      remaining: Math.max(0, this.limit - total),
      retryAfterSeconds,
    };
  }

  private async add(bucket: string, windowStart: number, hits: number): Promise<number> {
    const result = await sql<{ hits: number }>`
      insert into rate_limit_windows (bucket, window_start, hits) values (${bucket}, ${new Date(windowStart)}, ${hits})
      on conflict (bucket, window_start) do update set hits = rate_limit_windows.hits + excluded.hits
      returning hits`.execute(this.db);
    return Number(result.rows[0]?.hits ?? hits);
  }

  /** Adds locally counted hits to the shared rows (one statement) and forgets finished windows. */
  async flush(): Promise<void> {
    const nowMs = this.now().getTime();
    const buckets: string[] = [];
    const windows: Date[] = [];
    const hits: number[] = [];
    const states: BucketState[] = [];
    for (const [bucket, state] of this.buckets) {
      if (state.pending > 0) {
        buckets.push(bucket);
        windows.push(new Date(state.windowStart));
        hits.push(state.pending);
        states.push(state);
      } else if (state.windowStart + WINDOW_MS < nowMs) {
        this.buckets.delete(bucket);
      }
    }
    if (buckets.length > 0) {
      // Taken out of pending only while the write is in flight: if it fails they go with the next one.
      for (const state of states) state.pending = 0;
      let result: { rows: Array<{ hits: number; bucket: string }> };
      try {
        result = await sql<{ hits: number; bucket: string }>`
        insert into rate_limit_windows (bucket, window_start, hits)
        select * from unnest(${buckets}::text[], ${windows}::timestamptz[], ${hits}::int[])
        on conflict (bucket, window_start) do update set hits = rate_limit_windows.hits + excluded.hits
        returning bucket, hits`.execute(this.db);
      } catch (error) {
        states.forEach((state, i) => {
          state.pending += hits[i]!;
        });
        throw error;
      }
      const totals = new Map(result.rows.map((row) => [row.bucket, Number(row.hits)]));
      const syncedAt = this.now().getTime();
      buckets.forEach((bucket, i) => {
        const state = states[i]!;
        state.shared = totals.get(bucket) ?? state.shared;
        state.syncedAt = syncedAt;
      });
    }
    if (nowMs - this.lastCleanup > 60_000) {
      this.lastCleanup = nowMs;
      await sql`delete from rate_limit_windows where ctid in (select ctid from rate_limit_windows where window_start < ${new Date(nowMs - 5 * WINDOW_MS)} limit 5000)`.execute(
        this.db,
      );
    }
  }
}
