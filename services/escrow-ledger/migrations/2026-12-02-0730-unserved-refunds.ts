import { type Kysely, type Migration, sql } from 'kysely';

/**
 * Paid calls their seller did not serve, refunded without the seller's approval.
 * - `unserved_calls`: one row per gateway payment whose retry window closed after a seller failure
 *   (payment.call_unserved), keyed by the payment id so it is decided once: `closed` until the ledger decides,
 *   then `refunded` (its per-payment refund booked, `refund_id`), `served` (a retry was served after all) or
 *   `not_refundable` (`decision` says why). A refunded row waits in its payer's accrual until a batch sends it
 *   (`batch_id`).
 * - `refunds` kind `unserved_batch`: one escrow transfer to a payer carrying several unserved refunds (no
 *   transaction, no seller, no parts: the money left the seller's accounts when each was booked), phase `batch`.
 * - `transactions_payment`: the decision finds a payment's transaction by the gateway's payment id.
 * Frozen.
 */
export const unservedRefunds: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      alter table refunds drop constraint refunds_kind_check;
      alter table refunds add constraint refunds_kind_check
        check (kind in ('payment', 'unmatched_transfer', 'unserved_batch'));
      alter table refunds drop constraint refunds_phase_check;
      alter table refunds add constraint refunds_phase_check
        check (phase in ('in_escrow', 'after_release', 'in_suspense', 'batch'));
      alter table refunds drop constraint parts_add_up;
      alter table refunds add constraint parts_add_up check (
        case kind
          when 'payment' then seller_part_micro + platform_part_micro = amount_micro
            and transaction_id is not null and seller_id is not null and phase in ('in_escrow', 'after_release')
          when 'unserved_batch' then seller_part_micro = 0 and platform_part_micro = 0 and transaction_id is null
            and seller_id is null and phase = 'batch'
          else seller_part_micro = 0 and platform_part_micro = 0 and transaction_id is null and seller_id is null
            and phase = 'in_suspense' and tx_hash is not null and log_index is not null
            and transfer_refund_request_id is not null
        end);

      create table unserved_calls (
        payment_id text primary key,
        seller_id text not null,
        attempts integer not null check (attempts >= 1),
        retry_until timestamptz not null,
        closed_at timestamptz not null,
        status text not null check (status in ('closed', 'refunded', 'served', 'not_refundable')),
        decision text,
        transaction_id text references transactions (id),
        refund_id text references refunds (id),
        payer text,
        amount_micro bigint check (amount_micro > 0),
        batch_id text references refunds (id),
        event_id text not null,
        recorded_at timestamptz not null default now(),
        checked_at timestamptz not null default now(),
        decided_at timestamptz,
        check ((status = 'refunded') = (refund_id is not null and payer is not null and amount_micro is not null
          and decided_at is not null)),
        check (batch_id is null or status = 'refunded')
      );
      create index unserved_calls_undecided on unserved_calls (checked_at) where status = 'closed';
      create index unserved_calls_accrued on unserved_calls (payer, decided_at)
        where status = 'refunded' and batch_id is null;
      create index unserved_calls_batch on unserved_calls (batch_id) where batch_id is not null;
      create index transactions_payment on transactions (payment_id)`.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`
      drop index if exists transactions_payment;
      drop table unserved_calls;
      delete from refunds where kind = 'unserved_batch';
      alter table refunds drop constraint parts_add_up;
      alter table refunds add constraint parts_add_up check (
        case kind
          when 'payment' then seller_part_micro + platform_part_micro = amount_micro
            and transaction_id is not null and seller_id is not null and phase <> 'in_suspense'
          else seller_part_micro = 0 and platform_part_micro = 0 and transaction_id is null and seller_id is null
            and phase = 'in_suspense' and tx_hash is not null and log_index is not null
            and transfer_refund_request_id is not null
        end);
      alter table refunds drop constraint refunds_phase_check;
      alter table refunds add constraint refunds_phase_check check (phase in ('in_escrow', 'after_release', 'in_suspense'));
      alter table refunds drop constraint refunds_kind_check;
      alter table refunds add constraint refunds_kind_check check (kind in ('payment', 'unmatched_transfer'))`.execute(
      db,
    );
  },
};
