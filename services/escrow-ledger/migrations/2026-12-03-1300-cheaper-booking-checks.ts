import { type Kysely, type Migration, sql } from 'kysely';

/**
 * Fewer writes per booking, the same guarantees (a booking writes 2 entries and 5 postings, so each per-row check
 * or index entry of theirs counts about seven times):
 * - a posting's entry and account are checked once per INSERT statement (check_new_postings, sql/ledger.sql) in
 *   place of two per-row foreign keys, which ran a lookup and took a row lock per posting (about a tenth of a
 *   booking's time); neither referenced table can lose a row: entries refuse DELETE and TRUNCATE, and now so do
 *   accounts;
 * - postings are found by their entry through the primary key (entry_id, id), not a second index;
 * - "an entry is reversed at most once" indexes only reversals, not every entry's null;
 * - transfers awaiting the chain check are found by one index (their turn), not two;
 * - hex columns are checked by `^0x[0-9a-f]+$` and their length: Postgres's regex engine spends about 7 µs a row
 *   on a bounded repetition such as `{64}`, ten times the same check written this way.
 */
export const cheaperBookingChecks: Migration = {
  async up(db: Kysely<unknown>) {
    await sql`
      alter table postings drop constraint postings_entry_id_fkey, drop constraint postings_account_id_fkey;
      alter table postings drop constraint postings_pkey, add primary key (entry_id, id);
      drop index postings_entry;
      create trigger accounts_no_delete before delete on accounts
        for each row execute function refuse_change();
      create trigger accounts_no_truncate before truncate on accounts
        for each statement execute function refuse_change();
      -- Replaced by sql/ledger.sql, applied right after the migrations.
      create function check_new_postings() returns trigger language plpgsql as $$
      begin raise exception 'sql/ledger.sql is not applied'; end $$;
      drop trigger postings_balanced on postings;
      create trigger postings_checked after insert on postings referencing new table as new_postings
        for each statement execute function check_new_postings();

      alter table journal_entries drop constraint journal_entries_reverses_entry_id_key;
      create unique index journal_entries_reversed_once on journal_entries (reverses_entry_id)
        where reverses_entry_id is not null;

      drop index transfers_awaiting_chain;

      alter table transfers drop constraint transfers_tx_hash_check,
        add constraint transfers_tx_hash_check check (tx_hash ~ '^0x[0-9a-f]+$' and length(tx_hash) = 66);
      alter table transfer_claims drop constraint transfer_claims_tx_hash_check,
        add constraint transfer_claims_tx_hash_check check (tx_hash ~ '^0x[0-9a-f]+$' and length(tx_hash) = 66);
      alter table platform_payouts drop constraint platform_payouts_treasury_address_check,
        add constraint platform_payouts_treasury_address_check
          check (treasury_address ~ '^0x[0-9a-f]+$' and length(treasury_address) = 42);
      alter table seller_payout_addresses drop constraint seller_payout_addresses_payout_address_check,
        add constraint seller_payout_addresses_payout_address_check
          check (payout_address ~ '^0x[0-9a-f]+$' and length(payout_address) = 42);
    `.execute(db);
  },
};
