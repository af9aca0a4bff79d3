import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table cursors (
      chain_id integer primary key,
      next_block bigint not null check (next_block >= 0),
      updated_at timestamptz not null default now()
    )`.execute(db);
  // Hashes of recently scanned blocks: comparing them with the chain reveals a reorg.
  await sql`
    create table recent_blocks (
      chain_id integer not null,
      number bigint not null,
      hash text not null,
      primary key (chain_id, number)
    )`.execute(db);
  // One row per Transfer log seen in one block. A log re-included in another block after a reorg is a new row.
  await sql`
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
    )`.execute(db);
  await sql`create index transfers_pending on transfers (chain_id, block_number) where status = 'pending'`.execute(
    db,
  );
  await sql`create index transfers_by_block on transfers (chain_id, block_number)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table transfers; drop table recent_blocks; drop table cursors`.execute(db);
}
