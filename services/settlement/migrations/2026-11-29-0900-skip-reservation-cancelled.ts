import { type Kysely, type Migration, sql } from 'kysely';

/**
 * `settlements.skip_reason` `reservation_cancelled`: the ledger, asked again under the settlement's id, answers that
 * it gave the reservation back (its sweep cancelled it, never claimed within PAYOUT_UNCLAIMED_AFTER_MS): nothing is
 * recorded, and the money goes out with a later settlement. Frozen.
 */
export const skipReservationCancelled: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      alter table settlements drop constraint settlements_skip_reason_check;
      alter table settlements add constraint settlements_skip_reason_check
        check (skip_reason in ('below_minimum', 'nothing_available', 'reservation_cancelled'))`.execute(db);
  },
  async down(db: Kysely<any>) {
    // not valid: settlements skipped as reservation_cancelled stay as they are.
    await sql`
      alter table settlements drop constraint settlements_skip_reason_check;
      alter table settlements add constraint settlements_skip_reason_check
        check (skip_reason in ('below_minimum', 'nothing_available')) not valid`.execute(db);
  },
};
