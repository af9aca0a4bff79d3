import { type Kysely, type Migration, sql } from 'kysely';

/**
 * Buyers name a payment by its checkout session or its transfer's tx hash (refund requests, the public
 * transaction lookup): indexes, so an unauthenticated route never scans the transactions (the transfer's unique
 * index is partial, for live transactions only, and a reversed one must be found too).
 */
export const transactionsLookup: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      create index transactions_session on transactions (session_id) where session_id is not null;
      create index transactions_tx_hash on transactions (chain_id, tx_hash);
    `.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`drop index transactions_session; drop index transactions_tx_hash;`.execute(db);
  },
};
