import { type Kysely, type Migration, sql } from 'kysely';

/**
 * x402 payments: EIP-3009 authorizations submitted by the relayer (a gas-only key, never the escrow key).
 * One row per authorization (chain, token, payer, nonce): a second submission of the same authorization finds
 * it and never sends a second transaction. The signed transaction is recorded before it is broadcast; a fee
 * bump re-signs the same relayer nonce and keeps every earlier hash, since any of them may be the one mined.
 */
export const relayedAuthorizations: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      create table relayed_authorizations (
        id text primary key,
        chain_id integer not null,
        token_address text not null,
        payer text not null,
        auth_nonce text not null check (auth_nonce ~ '^0x[0-9a-f]{64}$'),
        to_address text not null,
        value_micro bigint not null check (value_micro > 0),
        valid_after bigint not null,
        valid_before bigint not null,
        signature text not null,
        status text not null check (status in ('signed', 'broadcast', 'confirmed', 'used_elsewhere', 'failed')),
        relayer_address text not null,
        relayer_nonce bigint,
        gas_limit bigint,
        raw_tx text,
        tx_hash text,
        earlier_tx_hashes text[] not null default '{}',
        max_fee_per_gas numeric(78, 0),
        max_priority_fee_per_gas numeric(78, 0),
        fee_bumps integer not null default 0,
        broadcast_attempts integer not null default 0,
        settled_tx_hash text,
        block_number bigint,
        log_index integer,
        last_error text,
        created_at timestamptz not null default now(),
        signed_at timestamptz,
        last_broadcast_at timestamptz,
        finished_at timestamptz,
        unique (chain_id, token_address, payer, auth_nonce)
      );
      create index relayed_authorizations_open on relayed_authorizations (relayer_nonce)
        where status in ('signed', 'broadcast');
      create unique index relayed_authorizations_relayer_nonce on relayed_authorizations
        (chain_id, relayer_address, relayer_nonce) where relayer_nonce is not null;
    `.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`drop table relayed_authorizations`.execute(db);
  },
};
