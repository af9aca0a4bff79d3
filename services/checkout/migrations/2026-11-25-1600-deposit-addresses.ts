import { type Kysely, type Migration, sql } from 'kysely';

/**
 * A deposit address per session (security issue, point 3): the HD child index checkout assigned and the address
 * derived from it. Indexes come in blocks from a sequence, so a replica takes a block, not a round trip, per
 * session. Sessions from before keep null here and their unique amount at the old shared deposit wallet.
 */
export const depositAddresses: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      alter table sessions add column deposit_address text, add column derivation_index bigint;
      -- A session at its own address is paid exactly its price (no suffix); one at the shared wallet had one.
      alter table sessions drop constraint sessions_check;
      alter table sessions add constraint sessions_exact_amount_check
        check (exact_amount_micro > price_micro or (deposit_address is not null and exact_amount_micro = price_micro));
      create unique index sessions_deposit_address on sessions (deposit_address) where deposit_address is not null;
      create unique index sessions_derivation_index on sessions (derivation_index) where derivation_index is not null;
      create sequence deposit_index_blocks minvalue 0 start with 0`.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`
      drop sequence if exists deposit_index_blocks;
      drop index if exists sessions_derivation_index;
      drop index if exists sessions_deposit_address;
      alter table sessions drop constraint sessions_exact_amount_check;
      alter table sessions add constraint sessions_check check (exact_amount_micro > price_micro);
      alter table sessions drop column if exists derivation_index, drop column if exists deposit_address`.execute(
      db,
    );
  },
};
