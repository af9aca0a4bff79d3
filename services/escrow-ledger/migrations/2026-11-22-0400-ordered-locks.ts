import { type Kysely, type Migration, sql } from 'kysely';

/**
 * Concurrent posting batches without deadlocks, and fewer per-row checks on the hot path.
 *
 * - The deadlock: inserting postings takes FOR KEY SHARE on each referenced account row (the foreign key
 *   check); the balance trigger then asked FOR UPDATE on the same rows, which conflicts with every other
 *   batch's KEY SHARE on the hot accounts (suspense, escrow, platform holds), so two batches waited on each
 *   other. Balance rows are now locked FOR NO KEY UPDATE (it excludes other balance updates but not foreign
 *   key checks), always in account id order.
 * - Accounts are created (when new) in (kind, owner) order once per batch, not once per posting line in an
 *   arbitrary order: two batches creating the same new sellers' accounts cannot wait on each other crosswise.
 * - Every entry balancing is checked once per INSERT statement over the inserted rows (the posting functions
 *   insert an entry's lines in one statement), instead of one deferred query per posting row. Since each
 *   statement's postings must net to zero per entry, every entry balances however many statements touch it.
 */
export const orderedLocks: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      drop trigger postings_balanced on postings;
      drop function check_entry_balanced();
      create function check_entries_balanced() returns trigger language plpgsql as $$
      declare v_entry bigint; v_net bigint;
      begin
        select entry_id, net into v_entry, v_net from (
          select entry_id, sum(case when side = 'debit' then amount_micro else -amount_micro end) as net
            from new_postings group by entry_id) s
         where net <> 0 limit 1;
        if v_entry is not null then
          raise exception 'journal entry % does not balance (debits - credits = %)', v_entry, v_net
            using errcode = '23514';
        end if;
        return null;
      end $$;
      create trigger postings_balanced after insert on postings referencing new table as new_postings
        for each statement execute function check_entries_balanced();

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
    `.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`
      drop trigger postings_balanced on postings;
      drop function check_entries_balanced();
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
    `.execute(db);
  },
};
