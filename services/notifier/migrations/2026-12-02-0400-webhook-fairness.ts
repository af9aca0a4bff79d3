import { type Kysely, type Migration, sql } from 'kysely';

/**
 * Fair webhook dispatch. A delivery being sent carries a lease (`leased_until`), so what a seller and each of its
 * targets has in flight is counted across replicas; the due index by target lets a pass visit each (seller,
 * target) queue without reading another's backlog; `webhook_circuits` is the breaker of each target (an
 * endpoint, or '' for the account's webhook URL) that keeps failing. Frozen.
 */
export const webhookFairness: Migration = {
  async up(db: Kysely<any>) {
    await sql`alter table webhook_deliveries add column leased_until timestamptz`.execute(db);
    await sql`create index webhook_deliveries_in_flight on webhook_deliveries (seller_id, leased_until) where leased_until is not null`.execute(
      db,
    );
    await sql`create index webhook_deliveries_target_due on webhook_deliveries (seller_id, (coalesce(endpoint_id, '')), next_attempt_at) where status = 'pending'`.execute(
      db,
    );
    await sql`create index webhook_deliveries_give_up on webhook_deliveries (give_up_at) where status = 'pending'`.execute(
      db,
    );
    await sql`
      create table webhook_circuits (
        seller_id text not null,
        target text not null,
        state text not null check (state in ('closed', 'open', 'half_open')),
        consecutive_failures integer not null check (consecutive_failures >= 0),
        open_count integer not null default 0 check (open_count >= 0),
        opened_at timestamptz,
        retry_at timestamptz,
        probe_until timestamptz,
        last_error text,
        updated_at timestamptz not null,
        primary key (seller_id, target),
        check ((state = 'closed') = (retry_at is null))
      )`.execute(db);
    await sql`create index webhook_circuits_not_closed on webhook_circuits (seller_id, target) where state <> 'closed'`.execute(
      db,
    );
  },
  async down(db: Kysely<any>) {
    await sql`drop table if exists webhook_circuits`.execute(db);
    await sql`drop index if exists webhook_deliveries_give_up`.execute(db);
    await sql`drop index if exists webhook_deliveries_target_due`.execute(db);
    await sql`drop index if exists webhook_deliveries_in_flight`.execute(db);
    await sql`alter table webhook_deliveries drop column if exists leased_until`.execute(db);
  },
};
