import { type Kysely, type Migration, sql } from 'kysely';

/**
 * Re-inclusion after a reorg: a transfer reorged away and then mined again in another block comes back as a new
 * transfer.observed with the same chainId:txHash:logIndex. It is booked again (a new inclusion: the transfer row
 * counts them), and its payment may claim it again:
 * - one LIVE transaction per transfer (a partial unique index ignoring reversed ones) instead of one ever;
 * - the idempotency keys of what an inclusion causes carry its number (`<key>#<n>` for n > 0): the money entry
 *   `transfer:<key>#<n>`, the payment `<key>#<n>`, the reorg reversal `reorg:<key>#<n>`;
 * - the block hash of the current inclusion is kept, so a transfer.reorged for an older block is ignored;
 * - a payment.confirmed that arrives while its transfer is still reorged is recorded as a `transfer_reorged`
 *   conflict with the whole payment in `detail.payment`, so the re-inclusion can book it then.
 */
export const reorgReinclusion: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      alter table transfers add column inclusion integer not null default 0 check (inclusion >= 0);
      -- The block of the current inclusion: a transfer.reorged about an older block (delivered after the
      -- re-inclusion was already seen) is stale and changes nothing.
      alter table transfers add column block_hash text;
      alter table transactions drop constraint one_transaction_per_transfer;
      -- One on-chain transfer pays for one live thing; a reversed transaction no longer holds its transfer.
      create unique index one_live_transaction_per_transfer on transactions (chain_id, tx_hash, log_index)
        where escrow_status <> 'reversed';
      alter table payment_conflicts add column resolution jsonb;

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
      alter table payment_conflicts drop column resolution;
      drop index one_live_transaction_per_transfer;
      alter table transactions add constraint one_transaction_per_transfer unique (chain_id, tx_hash, log_index);
      alter table transfers drop column inclusion, drop column block_hash;
    `.execute(db);
  },
};
