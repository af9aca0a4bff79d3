import { type Kysely, sql } from 'kysely';

/**
 * Checkout's session deposit addresses (`deposit.address_assigned`): watched until `watch_until`; each is first
 * backfilled from the block of its assignment (it may have been paid before the indexer heard of it). Kept after
 * that so a transfer out of one (settlement's sweep into escrow) is recognised as an internal move.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table deposit_addresses (
      address text primary key check (address = lower(address)),
      derivation_index bigint not null,
      session_id text not null,
      assigned_at timestamptz not null,
      watch_until timestamptz not null,
      backfilled boolean not null default false,
      registered_at timestamptz not null default now()
    );
    create index deposit_addresses_watched on deposit_addresses (watch_until);
    create index deposit_addresses_backfill on deposit_addresses (assigned_at) where not backfilled`.execute(
    db,
  );
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table if exists deposit_addresses`.execute(db);
}
