import { type Kysely, type Migration, sql } from 'kysely';

/**
 * Payout reservations nobody sends (issue 19, "Storm-proof"): after a Postgres crash, transactions stayed
 * `payout_pending` with no settlement open. A reservation whose answer settlement lost (it then asked under
 * another settlement id) holds the seller's money with no payout to come. `authorized_at` records that settlement
 * asked to send it (ledger.authorize_transfer, always before it signs); a reservation never authorized within
 * PAYOUT_UNCLAIMED_AFTER_MS is cancelled (its money back to available). Reservations made before this migration
 * count as authorized (never swept).
 */
export const payoutClaims: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      alter table payout_reservations add column authorized_at timestamptz;
      update payout_reservations set authorized_at = created_at;
      create index payout_reservations_unclaimed on payout_reservations (created_at)
        where status = 'reserved' and authorized_at is null;
      create index transactions_payout_pending on transactions (settlement_id)
        where escrow_status = 'payout_pending'`.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`
      drop index if exists transactions_payout_pending;
      drop index if exists payout_reservations_unclaimed;
      alter table payout_reservations drop column authorized_at`.execute(db);
  },
};
