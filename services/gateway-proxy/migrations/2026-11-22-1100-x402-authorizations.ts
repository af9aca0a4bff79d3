import { type Kysely, type Migration, sql } from 'kysely';

/**
 * x402 payments (EIP-3009 authorizations). One authorization buys one thing: (chain, token, payer, nonce) is
 * claimed here, with the resource it pays for, before anything is submitted, so of any number of presentations
 * across replicas exactly one reaches the relayer. Once its transfer is included, the transfer is claimed in
 * payment_claims like any payment (channel `facilitator` for sellers using Paygate as their x402 facilitator).
 */
export const x402Authorizations: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      create table x402_authorizations (
        chain_id integer not null,
        token text not null,
        payer text not null,
        auth_nonce text not null check (auth_nonce ~ '^0x[0-9a-f]{64}$'),
        signature text not null,
        to_address text not null,
        value_micro bigint not null check (value_micro > 0),
        valid_after bigint not null,
        valid_before bigint not null,
        resource text not null,
        seller_id text not null,
        purchase jsonb not null,
        x402_version integer not null check (x402_version in (1, 2)),
        state text not null check (state in ('submitting', 'settled', 'refused')),
        reason text,
        tx_hash text,
        log_index integer,
        claim_id text,
        attempts integer not null default 1,
        created_at timestamptz not null,
        updated_at timestamptz not null,
        primary key (chain_id, token, payer, auth_nonce)
      );
      create index x402_authorizations_submitting on x402_authorizations (updated_at) where state = 'submitting';
      alter table payment_claims drop constraint payment_claims_channel_check;
      alter table payment_claims add constraint payment_claims_channel_check
        check (channel in ('proxy', 'ticket', 'verify', 'facilitator'));
    `.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`drop table x402_authorizations`.execute(db);
  },
};
