import { type Kysely, type Migration, sql } from 'kysely';

/**
 * Windows of any length share rate_limit_windows (one-minute request limits beside the relayer's per-day
 * budgets): each row records its window's length, so the cleanup removes a day's count only once that day is
 * over, not after five minutes.
 */
export const rateLimitWindowLength: Migration = {
  async up(db: Kysely<any>) {
    await sql`alter table rate_limit_windows add column window_seconds integer not null default 60
      check (window_seconds > 0)`.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`alter table rate_limit_windows drop column window_seconds`.execute(db);
  },
};
