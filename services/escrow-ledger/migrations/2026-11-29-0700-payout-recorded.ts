import { type Kysely, type Migration, sql } from 'kysely';

/**
 * `payout_reservations.recorded_at`: when settlement said it had recorded the payout of the reservation (its
 * transaction committed; `ledger.reserve_payout` asked again with `recorded: true`). The payout sweep cancels only
 * reservations settlement never recorded: a recorded payout waiting behind others to be signed is not a lost answer.
 * Frozen.
 */
export const payoutRecorded: Migration = {
  async up(db: Kysely<any>) {
    await sql`alter table payout_reservations add column recorded_at timestamptz`.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`alter table payout_reservations drop column recorded_at`.execute(db);
  },
};
