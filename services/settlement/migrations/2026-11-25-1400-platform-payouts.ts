import { type Kysely, type Migration, sql } from 'kysely';

/**
 * The platform's revenue (its 5% fees) paid out of escrow to the treasury address: one `platform_payouts` row per
 * operator request, sent as an outgoing transfer of kind `platform_payout` (idempotency key = payoutId), like a
 * seller payout. `refused_reason` keeps why the ledger (or the per-transfer cap) refused a transfer before it was
 * signed, for the operator.
 */
export const platformPayouts: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      alter table outgoing_transfers drop constraint outgoing_transfers_kind_check;
      alter table outgoing_transfers add constraint outgoing_transfers_kind_check
        check (kind in ('payout', 'refund', 'platform_payout'));

      create table platform_payouts (
        payout_id text primary key,
        status text not null check (status in ('sending', 'completed', 'failed')),
        amount_micro bigint not null check (amount_micro > 0),
        treasury_address text not null,
        transfer_id text not null references outgoing_transfers (transfer_id),
        tx_hash text,
        failure_reason text,
        cancel_acknowledged_at timestamptz,
        created_at timestamptz not null default now(),
        completed_at timestamptz
      );
    `.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`
      drop table platform_payouts;
      alter table outgoing_transfers drop constraint outgoing_transfers_kind_check;
      alter table outgoing_transfers add constraint outgoing_transfers_kind_check check (kind in ('payout', 'refund'));
    `.execute(db);
  },
};
