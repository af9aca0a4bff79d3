-- The escrow ledger's functions and views: their one definition.
-- Applied after the versioned migrations whenever this file's checksum changes (libs/runtime applyRepeatableSql),
-- so a change is made here, never by copying a function into a new migration. Every statement must be
-- re-runnable: `create or replace`, and `drop … if exists` before a signature change.
-- Tables, constraints and triggers stay in the frozen, date-prefixed migrations.

-- book_payments took the fee as a constant until the fee became a parameter.
drop function if exists book_payments(jsonb, timestamptz);
-- transfer_in_entry built only the entry of a transfer a payment saw first, until it became the one definition
-- of every transfer_in entry (its key and memo are the caller's).
drop function if exists transfer_in_entry(text, bigint, text);

-- Append-only journal: UPDATE, DELETE and TRUNCATE of entries and postings are refused, DELETE and TRUNCATE of
-- accounts.
create or replace function refuse_change() returns trigger language plpgsql as $$
begin
  raise exception 'ledger table % refuses %: its rows are never changed or removed, corrections are new reversing entries',
    tg_table_name, tg_op using errcode = '55000';
end $$;

-- The account of a kind and owner, created on first use from its kind (normal side, floor).
create or replace function ledger_account(p_kind text, p_owner text) returns bigint language plpgsql as $$
declare v_id bigint;
begin
  select id into v_id from accounts where kind = p_kind and owner = p_owner;
  if v_id is null then
    insert into accounts (kind, owner, normal_side, floor_micro)
      select kind, p_owner, normal_side, floor_micro from account_kinds where kind = p_kind
      on conflict (kind, owner) do nothing
      returning id into v_id;
    if v_id is null then
      select id into v_id from accounts where kind = p_kind and owner = p_owner;
    end if;
    if v_id is null then raise exception 'unknown account kind %', p_kind using errcode = '23503'; end if;
  end if;
  return v_id;
end $$;

-- Posts one balanced entry; returns its id, or null when the idempotency key was already used
-- (the effect is then already on the books). Lines: [{kind, owner, side, amount}], zero lines skipped.
create or replace function post_entry(p_key text, p_type text, p_transaction_id text, p_reverses bigint,
                           p_lines jsonb, p_memo jsonb) returns bigint language plpgsql as $$
declare v_id bigint;
begin
  insert into journal_entries (idempotency_key, entry_type, transaction_id, reverses_entry_id, memo)
    values (p_key, p_type, p_transaction_id, p_reverses, p_memo)
    on conflict (idempotency_key) do nothing
    returning id into v_id;
  if v_id is null then return null; end if;
  -- Accounts are touched in id order so concurrent entries do not deadlock on balance rows.
  insert into postings (entry_id, account_id, side, amount_micro)
    select v_id, a.account_id, a.side, a.amount
      from (select ledger_account(l->>'kind', coalesce(l->>'owner', '')) as account_id,
                   l->>'side' as side, (l->>'amount')::bigint as amount
              from jsonb_array_elements(p_lines) l) a
     where a.amount <> 0
     order by a.account_id;
  return v_id;
end $$;

-- The postings of an INSERT statement, checked once per statement over the inserted rows: every entry they post to
-- exists and nets to zero, and every account they touch exists (in place of per-row foreign keys: neither table can
-- lose a row, both refuse DELETE and TRUNCATE).
create or replace function check_new_postings() returns trigger language plpgsql as $$
declare v_entry bigint; v_net bigint; v_missing boolean; v_account bigint;
begin
  select s.entry_id, s.net, j.id is null into v_entry, v_net, v_missing from (
    select entry_id, sum(case when side = 'debit' then amount_micro else -amount_micro end) as net
      from new_postings group by entry_id) s
    left join journal_entries j on j.id = s.entry_id
   where s.net <> 0 or j.id is null limit 1;
  if v_missing then
    raise exception 'posting to journal entry %, which does not exist', v_entry using errcode = '23503';
  end if;
  if v_entry is not null then
    raise exception 'journal entry % does not balance (debits - credits = %)', v_entry, v_net
      using errcode = '23514';
  end if;
  select p.account_id into v_account from (select distinct account_id from new_postings) p
   where not exists (select 1 from accounts a where a.id = p.account_id) limit 1;
  if v_account is not null then
    raise exception 'posting to account %, which does not exist', v_account using errcode = '23503';
  end if;
  return null;
end $$;
drop function if exists check_entries_balanced();

-- Balances are derived from postings, once per statement; rows locked FOR NO KEY UPDATE (the lock an UPDATE of a
-- non-key column takes) in id order, so concurrent batches queue on an account instead of deadlocking.
create or replace function apply_postings() returns trigger language plpgsql as $$
begin
  perform 1 from accounts where id in (select account_id from new_postings) order by id for no key update;
  update accounts a set balance_micro = a.balance_micro + d.delta
    from (select p.account_id,
                 sum(case when p.side = ac.normal_side then p.amount_micro else -p.amount_micro end) as delta
            from new_postings p join accounts ac on ac.id = p.account_id
           group by p.account_id) d
   where a.id = d.account_id;
  return null;
end $$;

-- Posts many entries at once: [{key, type, transactionId, lines: [{kind, owner, side, amount}], memo}].
-- Entries whose key was already used post nothing (idempotent). Missing accounts are created first, in one
-- global (kind, owner) order, before any balance row is locked.
create or replace function post_entries(p_entries jsonb) returns integer language plpgsql as $$
declare v_count integer; r record;
begin
  -- Missing accounts are created in one global order (kind, owner), before any balance row is locked.
  for r in select distinct l->>'kind' as kind, coalesce(l->>'owner', '') as owner
             from jsonb_array_elements(p_entries) e cross join jsonb_array_elements(e->'lines') l
            order by 1, 2 loop
    perform ledger_account(r.kind, r.owner);
  end loop;
  with elems as materialized (
    select e->>'key' as key, e from jsonb_array_elements(p_entries) e
  ), inserted as (
    insert into journal_entries (idempotency_key, entry_type, transaction_id, memo)
      select key, e->>'type', e->>'transactionId', e->'memo' from elems
      on conflict (idempotency_key) do nothing
      returning id, idempotency_key
  ), lines as (
    select i.id as entry_id, a.id as account_id, l->>'side' as side, (l->>'amount')::bigint as amount
      from inserted i
      join elems on elems.key = i.idempotency_key
      cross join jsonb_array_elements(elems.e->'lines') l
      join accounts a on a.kind = l->>'kind' and a.owner = coalesce(l->>'owner', '')
  )
  insert into postings (entry_id, account_id, side, amount_micro)
    select entry_id, account_id, side, amount from lines where amount <> 0 order by entry_id, account_id;
  get diagnostics v_count = row_count;
  return v_count;
end $$;

-- Balances are derived: this view lists any account whose running balance differs from its postings.
create or replace view account_balance_drift as
  select a.id, a.kind, a.owner, a.balance_micro,
         coalesce(sum(case when p.side = a.normal_side then p.amount_micro else -p.amount_micro end), 0)
           as postings_balance_micro
    from accounts a left join postings p on p.account_id = a.id
   group by a.id
  having a.balance_micro <> coalesce(sum(case when p.side = a.normal_side then p.amount_micro else -p.amount_micro end), 0);

-- The seller's share of a payment: floor(amount * (100 - fee) / 100), as splitFee does (integer division of a
-- positive bigint truncates); the platform's is the rest.
create or replace function seller_share_micro(p_amount bigint, p_platform_fee_percent integer) returns bigint
  language sql immutable as $$ select (p_amount * (100 - p_platform_fee_percent)) / 100 $$;

-- The entry of money arriving in the escrow wallet: into the escrow asset, held in suspense until a payment claims
-- it. Its one definition: book_payments builds it for a transfer a payment's claim saw first, and the transfer.observed
-- paths post it through post_transfer_in (services/escrow-ledger/src/payments/transfer-booking.ts).
-- Stable, as jsonb_build_object is: a function no more volatile than its body is inlined into the statement that
-- calls it, where an immutable one over stable calls would be run as a separate SQL call per row.
create or replace function transfer_in_entry(p_key text, p_amount bigint, p_memo jsonb) returns jsonb
  language sql stable as $$
  select jsonb_build_object('key', p_key, 'type', 'transfer_in',
    'lines', jsonb_build_array(
      jsonb_build_object('kind', 'escrow_asset', 'side', 'debit', 'amount', p_amount::text),
      jsonb_build_object('kind', 'suspense', 'side', 'credit', 'amount', p_amount::text)),
    'memo', p_memo) $$;

-- Posts one transfer_in entry (post_entry: null when its key was already used).
create or replace function post_transfer_in(p_key text, p_amount bigint, p_memo jsonb) returns bigint
  language sql as $$
  select post_entry(e->>'key', e->>'type', null, null, e->'lines', e->'memo')
    from (select transfer_in_entry(p_key, p_amount, p_memo) as e) entry $$;

-- The entry of a payment claiming its transfer: out of suspense into the seller's and the platform's holds.
create or replace function payment_entry(p_key text, p_transaction_id text, p_amount bigint, p_seller_share bigint,
    p_seller_id text, p_payment_id text, p_source text) returns jsonb
  language sql stable as $$
  select jsonb_build_object('key', p_key, 'type', 'payment', 'transactionId', p_transaction_id,
    'lines', jsonb_build_array(
      jsonb_build_object('kind', 'suspense', 'side', 'debit', 'amount', p_amount::text),
      jsonb_build_object('kind', 'seller_held', 'owner', p_seller_id, 'side', 'credit', 'amount', p_seller_share::text),
      jsonb_build_object('kind', 'platform_held', 'side', 'credit', 'amount', (p_amount - p_seller_share)::text)),
    'memo', jsonb_build_object('paymentId', p_payment_id, 'source', p_source)) $$;

-- When a payment's hold ends: its hold period after p_now, and never before its releaseNotBefore (a paid call's
-- payment waits for the call's outcome: paymentToBook, payments/confirmed.ts).
create or replace function payment_hold_until(p jsonb, p_now timestamptz) returns timestamptz
  language sql stable as $$
  select greatest(p_now + make_interval(hours => (p->>'holdPeriodHours')::integer),
    coalesce((p->>'releaseNotBefore')::timestamptz, p_now)) $$;

-- A payment entry keeps the paid call's trace context (its payment.confirmed envelope's), so the payout that later
-- pays it can join that trace. The entry unchanged without one ('return_target'); p_entry named once, so the call
-- is inlined.
create or replace function with_trace(p_entry jsonb, p_payment jsonb) returns jsonb
  language sql immutable as $$
  select jsonb_set_lax(p_entry, '{memo,trace}', p_payment->'confirmedEvent'->'trace', true, 'return_target') $$;

-- Books a batch of claimed payments (ledger.claim_transfer, in the claims' own transaction; a parked or reorged
-- payment when its transfer is mined again): each takes its transfer (one live transaction per transfer) and
-- moves its amount from suspense to the seller's and the platform's held accounts. transfer_claims already
-- decided whose the transfer is; where the books disagree (a transfer reorged away, an amount above the
-- transfer's, a transfer another transaction holds) a payment conflict is recorded for an operator instead. The
-- fee percent is passed by the caller from @paygate/money (PLATFORM_FEE_PERCENT), its one definition. A payment
-- that carries its `payment.confirmed` envelope (confirmedEvent) has it written to the outbox when, and only when,
-- it is booked: in the same statement, before the balance rows are locked (they stay locked until the commit).
create or replace function book_payments(p_payments jsonb, p_now timestamptz, p_platform_fee_percent integer)
  returns table (payment_id text, outcome text, transaction_id text, conflict_kind text, existing_transaction_id text)
  language plpgsql as $$
#variable_conflict use_column
declare
  p jsonb;
  v_chain integer; v_hash text; v_log integer; v_amount bigint; v_key text;
  v_transfer transfers%rowtype;
  v_existing_payment text; v_txn text; v_seller bigint; v_platform bigint; v_kind text;
  -- Transaction ids of the payments booked by the set-based first pass.
  v_first_pass text[];
  -- A plpgsql array grows in place; appending to a jsonb value would copy it each time (quadratic).
  v_entries jsonb[];
  -- The payment.confirmed envelopes of the payments booked.
  v_events jsonb[];
begin
  -- First pass, one statement per table: a transfer first seen here belongs to the first payment naming it
  -- (fresh, unclaimed, of this very amount: nothing can conflict), so it is inserted already claimed, its
  -- transaction booked and both entries built at once. Transfers are inserted in one global order, as below.
  with payments as (
    select e.p, e.ord, (e.p->>'chainId')::integer as chain_id, lower(e.p->>'txHash') as tx_hash,
           (e.p->>'logIndex')::integer as log_index, (e.p->>'amountMicro')::bigint as amount
      from jsonb_array_elements(p_payments) with ordinality as e(p, ord)
  ), firsts as (
    select distinct on (chain_id, tx_hash, log_index) * from payments order by chain_id, tx_hash, log_index, ord
  ), inserted as (
    insert into transfers (chain_id, tx_hash, log_index, amount_micro, from_address, status, booked_by, observed_at,
        claimed_by_transaction_id)
      select chain_id, tx_hash, log_index, amount, lower(p->>'payer'), 'observed', 'payment.confirmed', p_now,
             p->>'transactionId'
        from firsts order by chain_id, tx_hash collate "C", log_index
      on conflict do nothing
      returning claimed_by_transaction_id
  )
  select coalesce(array_agg(claimed_by_transaction_id), '{}') into v_first_pass from inserted;

  with fresh as (
    select e.p, e.ord, (e.p->>'chainId')::integer as chain_id, lower(e.p->>'txHash') as tx_hash,
           (e.p->>'logIndex')::integer as log_index, (e.p->>'amountMicro')::bigint as amount,
           seller_share_micro((e.p->>'amountMicro')::bigint, p_platform_fee_percent) as seller_share
      from jsonb_array_elements(p_payments) with ordinality as e(p, ord)
     where e.p->>'transactionId' in (select unnest(v_first_pass))
  ), booked as (
    insert into transactions (id, payment_id, source, seller_id, skill_id, skill_name, endpoint_id, session_id, payer,
        chain_id, network, tx_hash, log_index, amount_micro, seller_share_micro, platform_share_micro,
        hold_period_hours, hold_until, escrow_status, confirmed_at, created_at)
      select p->>'transactionId', p->>'paymentId', p->>'source', p->>'sellerId', p->>'skillId', p->>'skillName',
          p->>'endpointId', p->>'sessionId', lower(p->>'payer'), chain_id, p->>'network', tx_hash, log_index, amount,
          seller_share, amount - seller_share, (p->>'holdPeriodHours')::integer,
          payment_hold_until(p, p_now), 'held', (p->>'confirmedAt')::timestamptz,
          p_now
        from fresh order by ord
      returning id
  ), entries as (
    select ord, 1 as part,
        transfer_in_entry('transfer:' || chain_id || ':' || tx_hash || ':' || log_index, amount,
          jsonb_build_object('transfer', chain_id || ':' || tx_hash || ':' || log_index, 'from', lower(p->>'payer'),
            'bookedBy', 'payment.confirmed')) as entry
      from fresh
    union all
    select ord, 2, with_trace(payment_entry(chain_id || ':' || tx_hash || ':' || log_index, p->>'transactionId', amount,
        seller_share, p->>'sellerId', p->>'paymentId', p->>'source'), p)
      from fresh
  )
  -- (booked runs to completion whether or not this reads it: a data-modifying WITH always does.)
  select coalesce(array_agg(entry order by ord, part), '{}') into v_entries from entries;

  return query select e.p->>'paymentId', 'booked'::text, e.p->>'transactionId', null::text, null::text
    from jsonb_array_elements(p_payments) e(p) where e.p->>'transactionId' in (select unnest(v_first_pass));
  select coalesce(array_agg(e.p->'confirmedEvent'), '{}') into v_events
    from jsonb_array_elements(p_payments) e(p)
   where e.p->>'transactionId' in (select unnest(v_first_pass)) and e.p ? 'confirmedEvent';

  -- The rest, one by one in the caller's order (by transfer): a transfer already on the books (observed by the
  -- indexer, or claimed by the first pass or an earlier batch) is claimed, or the claim is a conflict.
  for p in select value from jsonb_array_elements(p_payments)
            where not (value->>'transactionId' in (select unnest(v_first_pass))) loop
    v_chain := (p->>'chainId')::integer;
    v_hash := lower(p->>'txHash');
    v_log := (p->>'logIndex')::integer;
    v_amount := (p->>'amountMicro')::bigint;
    v_key := v_chain || ':' || v_hash || ':' || v_log;
    payment_id := p->>'paymentId'; transaction_id := null; conflict_kind := null; existing_transaction_id := null;

    v_txn := p->>'transactionId';
    -- The first pass inserted every transfer of the batch it had not seen (or waited for the batch that did):
    -- the row is there.
    select * into v_transfer from transfers
      where chain_id = v_chain and tx_hash = v_hash and log_index = v_log for update;
    if not found then
      raise exception 'transfer % of payment % is not on the books', v_key, p->>'paymentId' using errcode = 'P0002';
    end if;

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

    v_seller := seller_share_micro(v_amount, p_platform_fee_percent);
    v_platform := v_amount - v_seller;
    insert into transactions (id, payment_id, source, seller_id, skill_id, skill_name, endpoint_id, session_id, payer,
        chain_id, network, tx_hash, log_index, amount_micro, seller_share_micro, platform_share_micro,
        hold_period_hours, hold_until, escrow_status, confirmed_at, created_at)
      values (v_txn, p->>'paymentId', p->>'source', p->>'sellerId', p->>'skillId', p->>'skillName', p->>'endpointId',
        p->>'sessionId', lower(p->>'payer'), v_chain, p->>'network', v_hash, v_log, v_amount, v_seller, v_platform,
        (p->>'holdPeriodHours')::integer, payment_hold_until(p, p_now), 'held',
        (p->>'confirmedAt')::timestamptz, p_now);
    update transfers set claimed_by_transaction_id = v_txn
      where chain_id = v_chain and tx_hash = v_hash and log_index = v_log;
    v_entries := array_append(v_entries, with_trace(payment_entry(
      v_key || case when v_transfer.inclusion > 0 then '#' || v_transfer.inclusion else '' end, v_txn, v_amount, v_seller,
      p->>'sellerId', p->>'paymentId', p->>'source'), p));
    if p ? 'confirmedEvent' then v_events := array_append(v_events, p->'confirmedEvent'); end if;
    outcome := 'booked'; transaction_id := v_txn;
    return next;
  end loop;
  insert into outbox (id, subject, envelope, published_at)
    select e->>'id', 'payment.confirmed', e, null from unnest(v_events) e;
  perform post_entries(to_jsonb(v_entries));
end $$;

-- Claims a batch of transfers and books the payments their claims bring (ledger.claim_transfer). Run on its own it
-- is its own transaction: the balance rows book_payments locks are released by the statement's commit, without
-- waiting for a round trip to a busy caller. p_requests: one object per request, naming distinct transfers (each
-- decides as it would alone): chain_id, tx_hash and payer in lower case, log_index, claim_id (the id a fresh claim
-- gets), claimed_via, reference, amount_micro, payment_id (null: the claim books nothing) and payment
-- (book_payments' element, with its payment.confirmed envelope, or null). A request's claim is inserted, or the
-- claim there before is found; its payment is booked when the claim is fresh, or when the same claimant asks again
-- and no payment of the transfer stands any more (reversed by a reorg or the chain check), the claim then naming
-- the new payment. One row per request: the claim as found before any booking (fresh when this request inserted
-- it; the latest transaction of its payment; whether a payment of the transfer stood) and the booking's outcome
-- (null when nothing was booked for it).
create or replace function claim_and_book(p_requests jsonb, p_now timestamptz, p_platform_fee_percent integer)
  returns table (batch_index integer, fresh boolean, claim_id text, claimed_via text, reference text,
    claimed_at timestamptz, payment_id text, transaction_id text, live boolean, booking text,
    booked_transaction_id text, conflict_kind text, existing_transaction_id text)
  language plpgsql as $$
#variable_conflict use_column
declare
  v_held jsonb;
  v_book jsonb;
  v_booked jsonb;
begin
  -- Claims are inserted in transfer order, so two batches in flight never wait on each other crosswise.
  insert into transfer_claims (chain_id, tx_hash, log_index, claim_id, claimed_via, reference, payer, amount_micro,
      claimed_at, payment_id)
    select r.chain_id, r.tx_hash, r.log_index, r.claim_id, r.claimed_via, r.reference, r.payer, r.amount_micro,
        p_now, r.payment_id
      from jsonb_to_recordset(p_requests) as r(chain_id integer, tx_hash text, log_index integer, claim_id text,
          claimed_via text, reference text, payer text, amount_micro bigint, payment_id text)
      order by r.chain_id, r.tx_hash collate "C", r.log_index
    on conflict (chain_id, tx_hash, log_index) do nothing;

  -- Each request's claim: its own insert, or the claim there before. A claim another batch committed while the
  -- insert waited for it is seen here (each statement of the function reads what was committed before it began).
  -- One primary-key lookup per request (lateral, limit): the cached plan never hashes the whole table. wants: its
  -- payment is booked now (a fresh claim, or a repeat by its claimant of a claim whose payment no longer stands).
  select coalesce(jsonb_agg(to_jsonb(w) order by w.batch_index), '[]') into v_held
    from (select h.*, h.has_payment and (h.fresh
        or (not h.live and h.claimed_via = h.asked_via and h.reference = h.asked_ref)) as wants
    from (
      select (e.ord - 1)::integer as batch_index, c.claim_id = e.value->>'claim_id' as fresh, c.claim_id,
          c.claimed_via, c.reference, c.claimed_at, c.payment_id,
          -- A fresh claim has no transaction yet.
          case when c.claim_id <> e.value->>'claim_id' then (select t.id from transactions t
            where t.payment_id = c.payment_id and t.chain_id = c.chain_id and t.tx_hash = c.tx_hash
            order by t.created_at desc, t.id desc limit 1) end as transaction_id,
          -- A scalar subquery with a limit, not exists: a cached generic plan may hash an exists over the table.
          c.claim_id <> e.value->>'claim_id' and coalesce((select true from transactions t
            where t.chain_id = c.chain_id and t.tx_hash = c.tx_hash and t.log_index = c.log_index
              and t.escrow_status <> 'reversed'
            limit 1), false) as live,
          jsonb_typeof(e.value->'payment') = 'object' as has_payment,
          e.value->'payment'->>'transactionId' as payment_transaction_id,
          e.value->'payment'->>'paymentId' as payment_payment_id,
          e.value->>'claimed_via' as asked_via, e.value->>'reference' as asked_ref
        from jsonb_array_elements(p_requests) with ordinality as e(value, ord)
        cross join lateral (select c.chain_id, c.tx_hash, c.log_index, c.claim_id, c.claimed_via, c.reference,
              c.claimed_at, c.payment_id
            from transfer_claims c
            where c.chain_id = (e.value->>'chain_id')::integer and c.tx_hash = e.value->>'tx_hash'
              and c.log_index = (e.value->>'log_index')::integer
            limit 1) c
    ) h) w;
  if jsonb_array_length(v_held) <> jsonb_array_length(p_requests) then
    raise exception 'a claim of this batch was neither inserted nor found' using errcode = 'P0002';
  end if;

  -- The payments to book, in transfer order (book_payments locks transfers in the order it is given them).
  select coalesce(jsonb_agg(r.payment order by (r.payment->>'chainId')::integer,
      lower(r.payment->>'txHash') collate "C", (r.payment->>'logIndex')::integer), '[]') into v_book
    from (select p_requests->((h.value->>'batch_index')::integer)->'payment' as payment
        from jsonb_array_elements(v_held) h
       where (h.value->>'wants')::boolean) r;
  select coalesce(jsonb_agg(to_jsonb(b)), '[]') into v_booked
    from book_payments(v_book, p_now, p_platform_fee_percent) b;

  return query
    with booked as (
      select * from jsonb_to_recordset(v_booked) as b(payment_id text, outcome text, transaction_id text,
          conflict_kind text, existing_transaction_id text)
    ), outcomes as (
      -- A booked payment's row names its own transaction; the others are found by payment id.
      select h.value as held, coalesce(to_jsonb(own), to_jsonb(other)) as booked
        from jsonb_array_elements(v_held) h
        left join booked own on (h.value->>'wants')::boolean and own.outcome = 'booked'
          and own.transaction_id = h.value->>'payment_transaction_id'
        left join booked other on (h.value->>'wants')::boolean and other.outcome <> 'booked'
          and other.payment_id = h.value->>'payment_payment_id'
    ), renamed as (
      -- A repeat's new payment is the one its claim names from now on (its repeats are answered with it).
      update transfer_claims c set payment_id = o.held->>'payment_payment_id'
        from outcomes o
       where o.booked is not null and not (o.held->>'fresh')::boolean and o.booked->>'outcome' <> 'duplicate'
         and c.claim_id = o.held->>'claim_id'
    )
    select (o.held->>'batch_index')::integer, (o.held->>'fresh')::boolean, o.held->>'claim_id',
        o.held->>'claimed_via', o.held->>'reference', (o.held->>'claimed_at')::timestamptz, o.held->>'payment_id',
        o.held->>'transaction_id', (o.held->>'live')::boolean, o.booked->>'outcome', o.booked->>'transaction_id',
        o.booked->>'conflict_kind', o.booked->>'existing_transaction_id'
      from outcomes o
     order by (o.held->>'batch_index')::integer;
end $$;
