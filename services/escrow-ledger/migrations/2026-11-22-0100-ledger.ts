import { type Kysely, type Migration, sql } from 'kysely';

/**
 * The double-entry ledger. Money invariants live here, in Postgres, not only in application code:
 * - every journal entry balances (a deferred constraint trigger checks debits = credits at commit);
 * - entries and postings are append-only (triggers refuse UPDATE, DELETE and TRUNCATE);
 * - each account's balance is derived from its postings by a trigger, and a CHECK refuses any balance
 *   below the floor its kind allows;
 * - one on-chain transfer pays for one transaction (unique constraint on the transfer key);
 * - every entry carries a unique idempotency key.
 */
export const ledgerInit: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      create table account_kinds (
        kind text primary key,
        normal_side text not null check (normal_side in ('debit', 'credit')),
        floor_micro bigint,
        description text not null
      );
      insert into account_kinds (kind, normal_side, floor_micro, description) values
        ('escrow_asset', 'debit', 0, 'USDC held by the escrow wallet on chain'),
        ('suspense', 'credit', 0, 'money received that no payment has claimed yet'),
        ('seller_held', 'credit', 0, 'seller share of payments still in their hold period'),
        ('platform_held', 'credit', 0, 'platform fee of payments still in their hold period'),
        ('seller_available', 'credit', null, 'released seller money not yet paid out; negative = owed by the seller'),
        ('seller_payout_pending', 'credit', 0, 'seller money reserved for a payout being sent'),
        ('platform_revenue', 'credit', 0, 'platform fees earned (released)'),
        ('refund_pending', 'credit', 0, 'refunds booked whose on-chain transfer is not confirmed yet');

      create table accounts (
        id bigserial primary key,
        kind text not null references account_kinds (kind),
        owner text not null default '',
        normal_side text not null check (normal_side in ('debit', 'credit')),
        floor_micro bigint,
        balance_micro bigint not null default 0,
        created_at timestamptz not null default now(),
        unique (kind, owner),
        constraint balance_above_floor check (floor_micro is null or balance_micro >= floor_micro)
      );

      create table journal_entries (
        id bigserial primary key,
        idempotency_key text not null unique,
        entry_type text not null,
        transaction_id text,
        reverses_entry_id bigint unique references journal_entries (id),
        memo jsonb,
        created_at timestamptz not null default now()
      );
      create index journal_entries_transaction on journal_entries (transaction_id) where transaction_id is not null;

      create table postings (
        id bigserial primary key,
        entry_id bigint not null references journal_entries (id),
        account_id bigint not null references accounts (id),
        side text not null check (side in ('debit', 'credit')),
        amount_micro bigint not null check (amount_micro > 0)
      );
      create index postings_entry on postings (entry_id);
      create index postings_account on postings (account_id);

      create function refuse_change() returns trigger language plpgsql as $$
      begin
        raise exception 'ledger table % is append-only: corrections are new reversing entries', tg_table_name
          using errcode = '55000';
      end $$;
      create trigger journal_entries_append_only before update or delete on journal_entries
        for each row execute function refuse_change();
      create trigger journal_entries_no_truncate before truncate on journal_entries
        for each statement execute function refuse_change();
      create trigger postings_append_only before update or delete on postings
        for each row execute function refuse_change();
      create trigger postings_no_truncate before truncate on postings
        for each statement execute function refuse_change();

      create function apply_posting() returns trigger language plpgsql as $$
      begin
        update accounts
           set balance_micro = balance_micro
             + case when new.side = normal_side then new.amount_micro else -new.amount_micro end
         where id = new.account_id;
        return null;
      end $$;
      create trigger postings_apply after insert on postings for each row execute function apply_posting();

      create function check_entry_balanced() returns trigger language plpgsql as $$
      declare net bigint;
      begin
        select coalesce(sum(case when side = 'debit' then amount_micro else -amount_micro end), 0)
          into net from postings where entry_id = new.entry_id;
        if net <> 0 then
          raise exception 'journal entry % does not balance (debits - credits = %)', new.entry_id, net
            using errcode = '23514';
        end if;
        return null;
      end $$;
      create constraint trigger postings_balanced after insert on postings
        deferrable initially deferred for each row execute function check_entry_balanced();

      create function ledger_account(p_kind text, p_owner text) returns bigint language plpgsql as $$
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
      create function post_entry(p_key text, p_type text, p_transaction_id text, p_reverses bigint,
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

      -- Balances are derived: this view lists any account whose running balance differs from its postings.
      create view account_balance_drift as
        select a.id, a.kind, a.owner, a.balance_micro,
               coalesce(sum(case when p.side = a.normal_side then p.amount_micro else -p.amount_micro end), 0)
                 as postings_balance_micro
          from accounts a left join postings p on p.account_id = a.id
         group by a.id
        having a.balance_micro <> coalesce(sum(case when p.side = a.normal_side then p.amount_micro else -p.amount_micro end), 0);

      create table transfers (
        chain_id integer not null,
        tx_hash text not null check (tx_hash ~ '^0x[0-9a-f]{64}$'),
        log_index integer not null check (log_index >= 0),
        amount_micro bigint not null check (amount_micro > 0),
        from_address text not null,
        to_address text,
        block_number bigint,
        status text not null check (status in ('observed', 'reorged')),
        booked_by text not null check (booked_by in ('transfer.observed', 'payment.confirmed')),
        claimed_by_transaction_id text,
        observed_at timestamptz not null,
        reorged_at timestamptz,
        primary key (chain_id, tx_hash, log_index)
      );
      create index transfers_unclaimed on transfers (observed_at) where claimed_by_transaction_id is null;

      create table transactions (
        id text primary key,
        payment_id text not null,
        source text not null,
        seller_id text not null,
        skill_id text,
        skill_name text,
        endpoint_id text,
        session_id text,
        payer text not null,
        chain_id integer not null,
        network text not null,
        tx_hash text not null,
        log_index integer not null,
        amount_micro bigint not null check (amount_micro > 0),
        seller_share_micro bigint not null check (seller_share_micro >= 0),
        platform_share_micro bigint not null check (platform_share_micro >= 0),
        refunded_micro bigint not null default 0,
        refunded_seller_micro bigint not null default 0,
        refunded_platform_micro bigint not null default 0,
        hold_period_hours integer not null check (hold_period_hours between 0 and 168),
        hold_until timestamptz not null,
        escrow_status text not null check (escrow_status in ('held', 'available', 'payout_pending', 'settled', 'reversed')),
        settlement_id text,
        confirmed_at timestamptz not null,
        released_at timestamptz,
        settled_at timestamptz,
        reversed_at timestamptz,
        created_at timestamptz not null default now(),
        -- One on-chain transfer pays for one thing.
        constraint one_transaction_per_transfer unique (chain_id, tx_hash, log_index),
        constraint shares_add_up check (seller_share_micro + platform_share_micro = amount_micro),
        constraint refunds_within_amount check (
          refunded_micro >= 0 and refunded_micro <= amount_micro
          and refunded_seller_micro + refunded_platform_micro = refunded_micro
          and refunded_seller_micro <= seller_share_micro and refunded_platform_micro <= platform_share_micro)
      );
      create index transactions_seller on transactions (seller_id, created_at desc, id desc);
      create index transactions_due on transactions (hold_until) where escrow_status = 'held';
      create index transactions_seller_available on transactions (seller_id) where escrow_status = 'available';
      create index transactions_settlement on transactions (settlement_id) where settlement_id is not null;

      create table payment_conflicts (
        id bigserial primary key,
        kind text not null check (kind in ('transfer_already_claimed', 'amount_exceeds_transfer', 'transfer_reorged', 'reorg_after_refund')),
        chain_id integer not null,
        tx_hash text not null,
        log_index integer not null,
        payment_id text,
        source text,
        seller_id text,
        amount_micro bigint,
        existing_transaction_id text,
        detail jsonb not null,
        status text not null default 'open' check (status in ('open', 'resolved')),
        created_at timestamptz not null default now(),
        unique (kind, chain_id, tx_hash, log_index, payment_id)
      );

      create table refund_requests (
        id text primary key,
        transaction_id text not null references transactions (id),
        seller_id text not null,
        payer text not null,
        reason text not null,
        signature text not null,
        status text not null check (status in ('pending', 'approved', 'rejected', 'completed')),
        refund_id text,
        decision_reason text,
        created_at timestamptz not null,
        decided_at timestamptz,
        completed_at timestamptz
      );
      create unique index refund_requests_one_pending on refund_requests (transaction_id) where status = 'pending';
      create index refund_requests_seller on refund_requests (seller_id, created_at desc);

      create table refunds (
        id text primary key,
        transaction_id text not null references transactions (id),
        seller_id text not null,
        payer text not null,
        chain_id integer not null,
        amount_micro bigint not null check (amount_micro > 0),
        seller_part_micro bigint not null check (seller_part_micro >= 0),
        platform_part_micro bigint not null check (platform_part_micro >= 0),
        phase text not null check (phase in ('in_escrow', 'after_release')),
        reason text not null,
        status text not null check (status in ('pending', 'completed', 'failed')),
        refund_request_id text references refund_requests (id),
        refund_tx_hash text,
        created_at timestamptz not null,
        completed_at timestamptz,
        constraint parts_add_up check (seller_part_micro + platform_part_micro = amount_micro)
      );
      create index refunds_transaction on refunds (transaction_id);

      create table idempotency_keys (
        seller_id text not null,
        key text not null,
        route text not null,
        request_hash text not null,
        response_status integer not null,
        response_body jsonb not null,
        created_at timestamptz not null default now(),
        primary key (seller_id, key)
      );

      create table payout_reservations (
        settlement_id text primary key,
        seller_id text not null,
        ok boolean not null,
        amount_micro bigint not null,
        available_micro bigint not null,
        reason text,
        status text not null check (status in ('reserved', 'completed', 'cancelled', 'refused')),
        tx_hash text,
        payout_address text,
        created_at timestamptz not null,
        completed_at timestamptz
      );
      create index payout_reservations_seller on payout_reservations (seller_id, created_at desc);
    `.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`drop table payout_reservations, idempotency_keys, refunds, refund_requests, payment_conflicts,
      transactions, transfers cascade; drop view account_balance_drift;
      drop table postings, journal_entries, accounts, account_kinds cascade;`.execute(db);
  },
};
