import { type Kysely, type Migration, sql } from 'kysely';

/**
 * A pay-per-call whose retry window passed after its seller failed it is made final, state `unserved` (no retry
 * can take it over any more, and the ledger refunds it), by a pass that reads the retryable claims by window.
 * Frozen.
 */
export const unservedClaims: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      alter table payment_claims drop constraint payment_claims_state_check;
      alter table payment_claims add constraint payment_claims_state_check
        check (state in ('in_flight', 'served', 'retryable', 'unserved'));
      create index payment_claims_retry_due on payment_claims (retry_until) where state = 'retryable'`.execute(
      db,
    );
  },
  async down(db: Kysely<any>) {
    await sql`
      drop index if exists payment_claims_retry_due;
      update payment_claims set state = 'retryable' where state = 'unserved';
      alter table payment_claims drop constraint payment_claims_state_check;
      alter table payment_claims add constraint payment_claims_state_check
        check (state in ('in_flight', 'served', 'retryable'))`.execute(db);
  },
};
