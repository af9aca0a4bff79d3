import { type Kysely, type Migration, sql } from 'kysely';

/**
 * `rate_limit_windows` (SharedRateLimiter, rate-limit.ts): hits per bucket per fixed window, shared by every replica
 * of a service. Each row records its window's length, so windows of any length share the table (one-minute request
 * limits beside per-day budgets) and the cleanup removes a day's count only once that day is over.
 */
export const rateLimitWindows: Migration = {
  async up(db: Kysely<unknown>) {
    await sql`
      create table rate_limit_windows (
        bucket text not null,
        window_start timestamptz not null,
        hits integer not null check (hits >= 0),
        window_seconds integer not null default 60 check (window_seconds > 0),
        primary key (bucket, window_start)
      )`.execute(db);
  },
};
