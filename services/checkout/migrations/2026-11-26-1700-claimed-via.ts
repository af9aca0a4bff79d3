import { type Kysely, type Migration, sql } from 'kysely';

/**
 * claimed_transfers.channel becomes claimed_via: the payment path that claimed the transfer at the ledger (x402,
 * verify). "Channel" is kept for live connections (the notifier's live channel) only.
 */
export const claimedVia: Migration = {
  async up(db: Kysely<any>) {
    await sql`alter table claimed_transfers rename column channel to claimed_via`.execute(db);
  },
};
