import { type Kysely, type Migration, sql } from 'kysely';

/** The ledger reports a seller's available balance, which is negative when refunds after settlement exceed it. */
export const availableMayBeNegative: Migration = {
  async up(db: Kysely<any>) {
    await sql`alter table settlements drop constraint settlements_available_micro_check`.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`alter table settlements add constraint settlements_available_micro_check check (available_micro >= 0)`.execute(
      db,
    );
  },
};
