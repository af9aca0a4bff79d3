import { type Kysely, type Migration, sql } from 'kysely';

/**
 * `relayer_refused_payers`: payers the relayer no longer submits for, by address (`payer`) and by contract code
 * (`code_hash`, the keccak256 of the payer's code, so the same bytecode at a new address is refused too), after a
 * transaction it relayed for them reverted on chain; until `refused_until`. `relayed_authorizations.payer_code_hash`
 * keeps the payer's code hash as it was when the authorization was submitted (null for an account without code).
 * Frozen.
 */
export const relayerRefusedPayers: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      create table relayer_refused_payers (
        chain_id integer not null,
        kind text not null check (kind in ('payer', 'code_hash')),
        subject text not null check (subject ~ '^0x[0-9a-f]{40}([0-9a-f]{24})?$'),
        payer text not null,
        tx_hash text not null,
        reason text not null,
        refused_at timestamptz not null default now(),
        refused_until timestamptz not null,
        primary key (chain_id, kind, subject)
      );
      alter table relayed_authorizations add column payer_code_hash text
        check (payer_code_hash ~ '^0x[0-9a-f]{64}$')`.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`
      alter table relayed_authorizations drop column payer_code_hash;
      drop table if exists relayer_refused_payers`.execute(db);
  },
};
