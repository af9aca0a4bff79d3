import { type Kysely, type Migration, sql } from 'kysely';

/**
 * The claims in flight, by claim time: the closure of calls whose replica died mid-call (payments/unserved.ts)
 * reads them every pass, and they are few (a call leaves the state when it is answered) among every claim made.
 */
export const paymentClaimsInFlight: Migration = {
  async up(db: Kysely<unknown>) {
    await sql`create index payment_claims_in_flight on payment_claims (created_at) where state = 'in_flight'`.execute(
      db,
    );
  },
};
