import { type Kysely, sql } from 'kysely';

/**
 * The scanner's cursor when the indexer heard of a deposit address: blocks from there on were scanned without it
 * until it was backfilled, however long it waited in the backfill queue, so its backfill reaches back at least that
 * far. Null for an address registered before the indexer had a cursor.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table deposit_addresses add column registered_block bigint`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`alter table deposit_addresses drop column if exists registered_block`.execute(db);
}
