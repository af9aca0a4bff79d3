import { type Kysely, type Migration, sql } from 'kysely';

/**
 * Balances are applied once per INSERT statement (a statement-level trigger over the inserted postings, summed
 * per account, rows locked in id order) instead of once per posting row: a batch that touches the same hot
 * account (suspense, escrow, platform holds) hundreds of times updates its row once, and the floor CHECK sees
 * the batch's net result. book_payments collects its entries and posts them with one post_entries call.
 */
export const batchedPostings: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      drop trigger postings_apply on postings;
      drop function apply_posting();

      create function apply_postings() returns trigger language plpgsql as $$
      begin
        perform 1 from accounts where id in (select account_id from new_postings) order by id for update;
        update accounts a set balance_micro = a.balance_micro + d.delta
          from (select p.account_id,
                       sum(case when p.side = ac.normal_side then p.amount_micro else -p.amount_micro end) as delta
                  from new_postings p join accounts ac on ac.id = p.account_id
                 group by p.account_id) d
         where a.id = d.account_id;
        return null;
      end $$;
      create trigger postings_apply after insert on postings referencing new table as new_postings
        for each statement execute function apply_postings();

      -- Posts many entries at once: [{key, type, transactionId, lines: [{kind, owner, side, amount}], memo}].
      -- Entries whose key was already used post nothing (idempotent), exactly as post_entry.
      create function post_entries(p_entries jsonb) returns integer language plpgsql as $$
      declare v_count integer;
      begin
        with elems as materialized (
          select e->>'key' as key, e from jsonb_array_elements(p_entries) e
        ), inserted as (
          insert into journal_entries (idempotency_key, entry_type, transaction_id, memo)
            select key, e->>'type', e->>'transactionId', e->'memo' from elems
            on conflict (idempotency_key) do nothing
            returning id, idempotency_key
        ), lines as (
          select i.id as entry_id, ledger_account(l->>'kind', coalesce(l->>'owner', '')) as account_id,
                 l->>'side' as side, (l->>'amount')::bigint as amount
            from inserted i
            join elems on elems.key = i.idempotency_key
            cross join jsonb_array_elements(elems.e->'lines') l
        )
        insert into postings (entry_id, account_id, side, amount_micro)
          select entry_id, account_id, side, amount from lines where amount <> 0 order by entry_id, account_id;
        get diagnostics v_count = row_count;
        return v_count;
      end $$;

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
                  'payer', p->>'payer', 'transferAmountMicro', v_transfer.amount_micro::text),
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
          v_entries := array_append(v_entries, jsonb_build_object('key', v_key, 'type', 'payment', 'transactionId', v_txn,
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
    await sql`drop function post_entries(jsonb)`.execute(db);
  },
};
