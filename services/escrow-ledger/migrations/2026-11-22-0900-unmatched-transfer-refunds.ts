import { type Kysely, type Migration, sql } from 'kysely';

/**
 * Refunds of unmatched transfers: money that reached the escrow wallet, matched no payment and that an operator
 * (checkout's `transfer.refund_requested`) sends back to its payer. It is booked out of suspense
 * (D suspense / C refund_pending), without a transaction or a seller, and then out of escrow when settlement has
 * sent it (refund.completed: D refund_pending / C escrow_asset), like every refund.
 * - `refunds.kind` is `payment` (a seller's transaction, as before) or `unmatched_transfer` (no transaction, no
 *   seller, no fee parts; the transfer key instead), and at most one refund per transfer (unique index);
 * - `transfers.refund_id` marks a refunded transfer: never both claimed by a payment and refunded (CHECK), and
 *   book_payments records a later payment on it as a `transfer_refunded` conflict instead of crediting it;
 * - conflict kind `refund_refused`: a refund request the ledger could not book (the transfer is claimed, reorged,
 *   or differs from the books), surfaced to the operator.
 */
export const unmatchedTransferRefunds: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      alter table refunds add column kind text not null default 'payment'
        check (kind in ('payment', 'unmatched_transfer'));
      alter table refunds add column tx_hash text;
      alter table refunds add column log_index integer;
      alter table refunds add column transfer_refund_request_id text;
      alter table refunds alter column transaction_id drop not null;
      alter table refunds alter column seller_id drop not null;
      alter table refunds drop constraint refunds_phase_check;
      alter table refunds add constraint refunds_phase_check check (phase in ('in_escrow', 'after_release', 'in_suspense'));
      alter table refunds drop constraint parts_add_up;
      alter table refunds add constraint parts_add_up check (
        case kind
          when 'payment' then seller_part_micro + platform_part_micro = amount_micro
            and transaction_id is not null and seller_id is not null and phase <> 'in_suspense'
          else seller_part_micro = 0 and platform_part_micro = 0 and transaction_id is null and seller_id is null
            and phase = 'in_suspense' and tx_hash is not null and log_index is not null
            and transfer_refund_request_id is not null
        end);
      -- One refund per unmatched transfer, whatever the number of requests.
      create unique index refunds_one_per_unmatched_transfer on refunds (chain_id, tx_hash, log_index)
        where kind = 'unmatched_transfer';

      alter table transfers add column refund_id text references refunds (id);
      alter table transfers add constraint refunded_or_claimed
        check (refund_id is null or claimed_by_transaction_id is null);

      alter table payment_conflicts drop constraint payment_conflicts_kind_check;
      alter table payment_conflicts add constraint payment_conflicts_kind_check check (kind in (
        'transfer_already_claimed', 'amount_exceeds_transfer', 'transfer_reorged', 'reorg_after_refund',
        'transfer_refunded', 'refund_refused'));

      create or replace function book_payments(p_payments jsonb, p_now timestamptz)
        returns table (payment_id text, outcome text, transaction_id text, conflict_kind text, existing_transaction_id text)
        language plpgsql as $$
      #variable_conflict use_column
      declare
        p jsonb;
        v_chain integer; v_hash text; v_log integer; v_amount bigint; v_key text;
        v_transfer transfers%rowtype;
        v_existing_payment text; v_txn text; v_seller bigint; v_platform bigint; v_kind text;
        -- A plpgsql array grows in place; appending to a jsonb value would copy it each time (quadratic).
        v_entries jsonb[] := '{}';
      begin
        for p in select value from jsonb_array_elements(p_payments) loop
          v_chain := (p->>'chainId')::integer;
          v_hash := lower(p->>'txHash');
          v_log := (p->>'logIndex')::integer;
          v_amount := (p->>'amountMicro')::bigint;
          v_key := v_chain || ':' || v_hash || ':' || v_log;
          payment_id := p->>'paymentId'; transaction_id := null; conflict_kind := null; existing_transaction_id := null;

          insert into transfers (chain_id, tx_hash, log_index, amount_micro, from_address, status, booked_by, observed_at)
            values (v_chain, v_hash, v_log, v_amount, lower(p->>'payer'), 'observed', 'payment.confirmed', p_now)
            on conflict do nothing;
          if found then
            v_entries := array_append(v_entries, jsonb_build_object('key', 'transfer:' || v_key, 'type', 'transfer_in',
              'lines', jsonb_build_array(
                jsonb_build_object('kind', 'escrow_asset', 'side', 'debit', 'amount', v_amount::text),
                jsonb_build_object('kind', 'suspense', 'side', 'credit', 'amount', v_amount::text)),
              'memo', jsonb_build_object('transfer', v_key, 'from', lower(p->>'payer'), 'bookedBy', 'payment.confirmed')));
          end if;
          select * into v_transfer from transfers
            where chain_id = v_chain and tx_hash = v_hash and log_index = v_log for update;

          v_kind := null;
          if v_transfer.claimed_by_transaction_id is not null then
            select t.payment_id into v_existing_payment from transactions t where t.id = v_transfer.claimed_by_transaction_id;
            if v_existing_payment = p->>'paymentId' then
              outcome := 'duplicate'; transaction_id := v_transfer.claimed_by_transaction_id;
              return next; continue;
            end if;
            v_kind := 'transfer_already_claimed';
          elsif v_transfer.refund_id is not null then
            -- An operator sent this unmatched transfer back to its payer: it cannot pay for anything now.
            v_kind := 'transfer_refunded';
          elsif v_transfer.status = 'reorged' then
            v_kind := 'transfer_reorged';
          elsif v_amount > v_transfer.amount_micro then
            v_kind := 'amount_exceeds_transfer';
          end if;
          if v_kind is not null then
            insert into payment_conflicts (kind, chain_id, tx_hash, log_index, payment_id, source, seller_id, amount_micro,
                existing_transaction_id, detail, created_at)
              values (v_kind, v_chain, v_hash, v_log, p->>'paymentId', p->>'source', p->>'sellerId', v_amount,
                v_transfer.claimed_by_transaction_id,
                jsonb_build_object('eventId', p->>'eventId', 'skillId', p->'skillId', 'sessionId', p->'sessionId',
                  'payer', p->>'payer', 'transferAmountMicro', v_transfer.amount_micro::text, 'payment', p),
                p_now)
              on conflict do nothing;
            outcome := case when found then 'conflict' else 'conflict_seen' end;
            conflict_kind := v_kind; existing_transaction_id := v_transfer.claimed_by_transaction_id;
            return next; continue;
          end if;

          -- Integer division of a positive bigint truncates: floor(amount * 95 / 100), as @paygate/money splitFee.
          v_seller := (v_amount * 95) / 100;
          v_platform := v_amount - v_seller;
          v_txn := p->>'transactionId';
          insert into transactions (id, payment_id, source, seller_id, skill_id, skill_name, endpoint_id, session_id, payer,
              chain_id, network, tx_hash, log_index, amount_micro, seller_share_micro, platform_share_micro,
              hold_period_hours, hold_until, escrow_status, confirmed_at, created_at)
            values (v_txn, p->>'paymentId', p->>'source', p->>'sellerId', p->>'skillId', p->>'skillName', p->>'endpointId',
              p->>'sessionId', lower(p->>'payer'), v_chain, p->>'network', v_hash, v_log, v_amount, v_seller, v_platform,
              (p->>'holdPeriodHours')::integer, p_now + make_interval(hours => (p->>'holdPeriodHours')::integer), 'held',
              (p->>'confirmedAt')::timestamptz, p_now);
          update transfers set claimed_by_transaction_id = v_txn
            where chain_id = v_chain and tx_hash = v_hash and log_index = v_log;
          v_entries := array_append(v_entries, jsonb_build_object('key',
            v_key || case when v_transfer.inclusion > 0 then '#' || v_transfer.inclusion else '' end,
            'type', 'payment', 'transactionId', v_txn,
            'lines', jsonb_build_array(
              jsonb_build_object('kind', 'suspense', 'side', 'debit', 'amount', v_amount::text),
              jsonb_build_object('kind', 'seller_held', 'owner', p->>'sellerId', 'side', 'credit', 'amount', v_seller::text),
              jsonb_build_object('kind', 'platform_held', 'side', 'credit', 'amount', v_platform::text)),
            'memo', jsonb_build_object('paymentId', p->>'paymentId', 'source', p->>'source')));
          outcome := 'booked'; transaction_id := v_txn;
          return next;
        end loop;
        perform post_entries(to_jsonb(v_entries));
      end $$;
    `.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`
      alter table transfers drop constraint refunded_or_claimed;
      alter table transfers drop column refund_id;
      drop index refunds_one_per_unmatched_transfer;
      delete from refunds where kind = 'unmatched_transfer';
      alter table refunds drop constraint parts_add_up;
      alter table refunds add constraint parts_add_up check (seller_part_micro + platform_part_micro = amount_micro);
      alter table refunds drop constraint refunds_phase_check;
      alter table refunds add constraint refunds_phase_check check (phase in ('in_escrow', 'after_release'));
      alter table refunds alter column transaction_id set not null;
      alter table refunds alter column seller_id set not null;
      alter table refunds drop column kind, drop column tx_hash, drop column log_index,
        drop column transfer_refund_request_id;
    `.execute(db);
  },
};
