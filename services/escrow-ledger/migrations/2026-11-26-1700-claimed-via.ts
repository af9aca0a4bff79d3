import { type Kysely, type Migration, sql } from 'kysely';

/**
 * transfer_claims.channel becomes claimed_via: the payment path that claimed the transfer (x402, verify, checkout,
 * operator_refund). "Channel" is kept for live connections (the notifier's live channel) only.
 */
export const claimedVia: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      alter table transfer_claims rename column channel to claimed_via;
      alter table transfer_claims rename constraint transfer_claims_channel_check to transfer_claims_claimed_via_check;
    `.execute(db);
  },
};
