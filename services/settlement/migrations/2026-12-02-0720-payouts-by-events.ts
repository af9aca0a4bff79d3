import { type Kysely, type Migration, sql } from 'kysely';

/**
 * Payouts follow the ledger's decisions (`payout.reserved` / `payout.refused`) and end with settlement's own event
 * (`settlement.completed`, `revenue.paid_out` or `payout.failed`): the handshake's bookkeeping goes (the
 * acknowledgement and cancellation columns, the reservation retry schedule). A platform payout is `requested`
 * until the ledger decides it (`refused`: nothing to pay), so its amount and transfer are known only then. Frozen.
 */
export const payoutsByEvents: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      drop index if exists settlements_unacknowledged;
      drop index if exists settlements_uncancelled;
      drop index if exists settlements_pending;
      alter table settlements drop column recorded_acknowledged_at, drop column cancel_acknowledged_at,
        drop column attempts, drop column next_attempt_at;
      create index settlements_pending on settlements (created_at) where status = 'pending';
      alter table platform_payouts drop column cancel_acknowledged_at;
      alter table platform_payouts alter column amount_micro drop not null, alter column transfer_id drop not null;
      alter table platform_payouts drop constraint platform_payouts_status_check;
      alter table platform_payouts add constraint platform_payouts_status_check
        check (status in ('requested', 'refused', 'sending', 'completed', 'failed'));
      alter table platform_payouts add constraint platform_payouts_sent_check
        check (status in ('requested', 'refused') or (amount_micro is not null and transfer_id is not null))`.execute(
      db,
    );
  },
  async down(db: Kysely<any>) {
    // not valid: platform payouts requested or refused stay as they are.
    await sql`
      alter table platform_payouts drop constraint platform_payouts_sent_check;
      alter table platform_payouts drop constraint platform_payouts_status_check;
      alter table platform_payouts add constraint platform_payouts_status_check
        check (status in ('sending', 'completed', 'failed')) not valid;
      alter table platform_payouts add column cancel_acknowledged_at timestamptz;
      drop index if exists settlements_pending;
      alter table settlements add column recorded_acknowledged_at timestamptz,
        add column cancel_acknowledged_at timestamptz, add column attempts integer not null default 0,
        add column next_attempt_at timestamptz not null default now();
      create index settlements_pending on settlements (next_attempt_at) where status = 'pending'`.execute(db);
  },
};
