import { type Kysely, type Migration, sql } from 'kysely';

/**
 * What became of a paid call the gateway forwarded to the seller (issue 21): one row per attempt the gateway
 * reported, a failure (payment.call_failed: the seller's 5xx, a timeout, no connection, no valid URL, with the
 * buyer's retry window) or a retry served after one (payment.call_recovered). Keyed by the gateway's payment id,
 * not the transaction: the events may arrive before payment.confirmed is booked, and in any order (the highest
 * attempt is the call's state). A payment with no row was served at its first attempt.
 */
export const callOutcomes: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      create table payment_call_attempts (
        payment_id text not null,
        attempt integer not null check (attempt >= 1),
        seller_id text not null,
        outcome text not null check (outcome in ('failed', 'served')),
        upstream_outcome text check (upstream_outcome in ('error_status', 'timeout', 'unreachable', 'misconfigured')),
        upstream_status integer,
        at timestamptz not null,
        retry_until timestamptz,
        event_id text not null,
        recorded_at timestamptz not null default now(),
        primary key (payment_id, attempt),
        check ((outcome = 'failed') = (upstream_outcome is not null and retry_until is not null))
      )`.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`drop table payment_call_attempts`.execute(db);
  },
};
