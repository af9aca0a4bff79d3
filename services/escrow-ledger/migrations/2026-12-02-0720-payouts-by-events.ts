import { type Kysely, type Migration, sql } from 'kysely';

/**
 * Payouts are decided by the ledger from settlement's `settlement.due` / `platform_payout.requested` and given back
 * only on settlement's `payout.failed`: the columns of the request/answer handshake (`authorized_at`,
 * `recorded_at`, read by the reservation sweep) go. `seller_payout_addresses` is the ledger's own view of where each
 * seller is paid (`seller.updated`, newer revisions only). Frozen.
 */
export const payoutsByEvents: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      drop index if exists payout_reservations_unclaimed;
      alter table payout_reservations drop column authorized_at, drop column recorded_at;
      alter table platform_payouts drop column authorized_at;
      create table seller_payout_addresses (
        seller_id text primary key,
        revision integer not null check (revision >= 1),
        payout_address text not null check (payout_address ~ '^0x[0-9a-f]{40}$'),
        updated_at timestamptz not null default now()
      )`.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`
      drop table seller_payout_addresses;
      alter table platform_payouts add column authorized_at timestamptz;
      alter table payout_reservations add column authorized_at timestamptz, add column recorded_at timestamptz;
      update payout_reservations set authorized_at = created_at, recorded_at = created_at;
      update platform_payouts set authorized_at = created_at`.execute(db);
  },
};
