import { type Kysely, type Migration, sql } from 'kysely';

/** The indexer's schema: its scan cursor per chain, the hashes of recent blocks, the transfers it saw, deposit addresses. */
export const baseline: Migration = {
  async up(db: Kysely<unknown>) {
    await sql`
      create table cursors (
        chain_id integer primary key,
        next_block bigint not null check (next_block >= 0),
        updated_at timestamptz not null default now()
      );

      -- Hashes of recently scanned blocks: comparing them with the chain reveals a reorg.
      create table recent_blocks (
        chain_id integer not null,
        number bigint not null,
        hash text not null,
        primary key (chain_id, number)
      );

      -- One row per Transfer log seen in one block. A log re-included in another block after a reorg is a new row.
      create table transfers (
        chain_id integer not null,
        block_hash text not null,
        tx_hash text not null,
        log_index integer not null,
        block_number bigint not null,
        from_address text not null,
        to_address text not null,
        token text not null,
        amount_micro bigint not null check (amount_micro >= 0),
        status text not null check (status in ('pending', 'published', 'reorged')),
        seen_at timestamptz not null default now(),
        published_at timestamptz,
        reorged_at timestamptz,
        primary key (chain_id, block_hash, tx_hash, log_index)
      );
      create index transfers_pending on transfers (chain_id, block_number) where status = 'pending';
      create index transfers_by_block on transfers (chain_id, block_number);

      -- Checkout's session deposit addresses (deposit.address_assigned), watched until watch_until. Each is first
      -- backfilled (scanned back) from the block of its assignment: it may have been paid before the indexer heard
      -- of it. registered_block is the scanner's cursor when the indexer heard of it: blocks from there on were
      -- scanned without it until its backfill, however long that waited, so the backfill reaches back at least that
      -- far (null when the indexer had no cursor yet). Kept after the watch so a transfer out of one (settlement's
      -- sweep into escrow) is recognised as an internal move.
      create table deposit_addresses (
        address text primary key check (address = lower(address)),
        derivation_index bigint not null,
        session_id text not null,
        assigned_at timestamptz not null,
        watch_until timestamptz not null,
        backfilled boolean not null default false,
        registered_at timestamptz not null default now(),
        registered_block bigint
      );
      create index deposit_addresses_watched on deposit_addresses (watch_until);
      create index deposit_addresses_backfill on deposit_addresses (assigned_at) where not backfilled`.execute(
      db,
    );
  },
};
