import { type Kysely, type Migration, sql } from 'kysely';

/**
 * `platform_payouts.authorized_at`: when settlement first asked to send the platform payout (ledger.authorize_transfer).
 * A reservation never asked for within PAYOUT_UNCLAIMED_AFTER_MS lost its answer (a crash after the ledger committed
 * it) and is cancelled by the payout sweep, as seller payout reservations are. Frozen.
 */
export const platformPayoutClaims: Migration = {
  async up(db: Kysely<any>) {
    await sql`alter table platform_payouts add column authorized_at timestamptz`.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`alter table platform_payouts drop column authorized_at`.execute(db);
  },
};
