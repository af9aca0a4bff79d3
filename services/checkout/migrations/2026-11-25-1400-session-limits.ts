import { type Kysely, type Migration, sql } from 'kysely';

/**
 * Limits on session creation (security issue, point 3): the shared rate-limit windows (per key, per client),
 * and the indexes behind the per-seller caps: open sessions per seller, and a seller's unpaid amount
 * reservations within one price's suffix window.
 */
export const sessionLimits: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      create table rate_limit_windows (
        bucket text not null,
        window_start timestamptz not null,
        hits integer not null check (hits >= 0),
        window_seconds integer not null default 60 check (window_seconds > 0),
        primary key (bucket, window_start)
      );
      create index sessions_open_by_seller on sessions (seller_id, expires_at) where status = 'open';
      create index sessions_unpaid_reserved_by_seller on sessions (seller_id, exact_amount_micro)
        where amount_reserved and transfer_id is null`.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`
      drop index if exists sessions_unpaid_reserved_by_seller;
      drop index if exists sessions_open_by_seller;
      drop table if exists rate_limit_windows`.execute(db);
  },
};
