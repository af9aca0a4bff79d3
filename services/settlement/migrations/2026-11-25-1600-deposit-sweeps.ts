import { type Kysely, type Migration, sql } from 'kysely';

/**
 * Session deposit addresses and their sweeps into escrow (security issue, point 3). `deposit_addresses`: the
 * derivation index checkout assigned (`deposit.address_assigned`) and whether the address may hold money (a
 * transfer to it was observed and it was not seen empty since); `deposit_sweeps`: each EIP-3009 authorization
 * settlement signed to move an address's balance into escrow, recorded before it is submitted, at most one open
 * per address.
 */
export const depositSweeps: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      create table deposit_addresses (
        address text primary key check (address = lower(address)),
        derivation_index bigint,
        session_id text,
        holding boolean not null default false,
        check_due_at timestamptz,
        last_balance_micro bigint,
        updated_at timestamptz not null default now()
      );
      create index deposit_addresses_holding on deposit_addresses (address) where holding;
      create index deposit_addresses_due on deposit_addresses (check_due_at) where check_due_at is not null;
      create table deposit_sweeps (
        sweep_id text primary key,
        address text not null references deposit_addresses (address),
        amount_micro bigint not null check (amount_micro > 0),
        auth_nonce text not null unique,
        valid_after bigint not null,
        valid_before bigint not null,
        signature text not null,
        status text not null check (status in ('open', 'confirmed', 'failed')),
        tx_hash text,
        last_error text,
        created_at timestamptz not null default now(),
        finished_at timestamptz
      );
      create unique index deposit_sweeps_one_open on deposit_sweeps (address) where status = 'open'`.execute(
      db,
    );
  },
  async down(db: Kysely<any>) {
    await sql`drop table if exists deposit_sweeps; drop table if exists deposit_addresses`.execute(db);
  },
};
