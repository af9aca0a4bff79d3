import { type Kysely, type Migration, sql } from 'kysely';

/**
 * payment_claims.channel becomes claimed_via: the payment path a transfer was claimed through (proxy, ticket,
 * verify, facilitator). "Channel" is kept for live connections (the notifier's live channel) only.
 */
export const claimedVia: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      alter table payment_claims rename column channel to claimed_via;
      alter table payment_claims rename constraint payment_claims_channel_check to payment_claims_claimed_via_check;
    `.execute(db);
  },
};
