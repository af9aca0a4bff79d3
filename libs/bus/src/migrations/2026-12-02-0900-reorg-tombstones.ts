import { type Kysely, type Migration, sql } from 'kysely';

/**
 * `reorg_tombstones` (reorg-tombstones.ts): a `transfer.reorged` for a transfer the service does not know yet (its
 * `transfer.observed` is delayed in another consumer). The next `transfer.observed` of the same transfer in the same
 * block takes the row and is not applied: the block it names left the chain.
 */
export const reorgTombstones: Migration = {
  async up(db: Kysely<unknown>) {
    await sql`
      create table reorg_tombstones (
        chain_id integer not null,
        tx_hash text not null,
        log_index integer not null,
        block_hash text not null,
        event_id text not null,
        recorded_at timestamptz not null default now(),
        primary key (chain_id, tx_hash, log_index, block_hash)
      )`.execute(db);
  },
};
