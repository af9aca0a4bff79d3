import { type Kysely, type Migration, sql } from 'kysely';

/**
 * Rate limits shared by every replica (SharedRateLimiter of @paygate/http): hits per bucket per fixed window,
 * each row with its window's length. The notifier counts a seller's test events and redeliveries here. Frozen.
 */
export const rateLimitWindows: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      create table rate_limit_windows (
        bucket text not null,
        window_start timestamptz not null,
        hits integer not null check (hits >= 0),
        window_seconds integer not null default 60 check (window_seconds > 0),
        primary key (bucket, window_start)
      )`.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`drop table if exists rate_limit_windows`.execute(db);
  },
};
