import { type Kysely, type Migration, sql } from 'kysely';

/**
 * Why a claim is retryable: the seller failed its last attempt, the buyer's body could not be forwarded, or no
 * attempt was ever made (settled after its caller stopped waiting). The closure of unserved calls
 * (payments/unserved.ts) reports the last as the buyer's timeout, so a payment nobody forwarded is refunded too.
 */
export const paymentClaimsRetryCause: Migration = {
  async up(db: Kysely<unknown>) {
    await sql`alter table payment_claims add column retry_cause text
      check (retry_cause in ('seller_failure', 'buyer_body', 'not_attempted'))`.execute(db);
  },
};
