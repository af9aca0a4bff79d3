import { type Kysely, type Migration, sql } from 'kysely';

/**
 * `settlements.recorded_acknowledged_at`: when the ledger answered settlement's word that the payout is recorded
 * (`ledger.reserve_payout` asked again with `recorded: true`). Until then the scheduler says it again each pass
 * while the payout is not signed yet, or the ledger's sweep may give its reservation back. Payouts `sending` before
 * this migration are null too: told again (the ledger's answer is idempotent). Frozen.
 */
export const recordedAcknowledged: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      alter table settlements add column recorded_acknowledged_at timestamptz;
      create index settlements_unacknowledged on settlements (settlement_id)
        where status = 'sending' and recorded_acknowledged_at is null`.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`
      drop index if exists settlements_unacknowledged;
      alter table settlements drop column recorded_acknowledged_at`.execute(db);
  },
};
