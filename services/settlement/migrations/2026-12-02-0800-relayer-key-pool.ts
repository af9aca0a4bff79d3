import { type Kysely, type Migration, sql } from 'kysely';

/**
 * The relayer signs with a pool of keys: `relayed_authorizations.relayer_address` names the key whose nonce sequence
 * a row is in, and each key's background pass reads its own open rows (`relayed_authorizations_open_by_relayer`).
 * `relayer_code_hash_reverts`: the distinct contract payers of one code hash whose relayed transaction reverted for
 * their own check; the code hash is refused only once enough distinct payers share it, so one wallet that reverts
 * does not lock out every wallet with the same bytecode (a Safe proxy's code is the same for every Safe). Frozen.
 */
export const relayerKeyPool: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      create index relayed_authorizations_open_by_relayer on relayed_authorizations
        (chain_id, relayer_address, relayer_nonce) where status in ('signed', 'broadcast');
      create table relayer_code_hash_reverts (
        chain_id integer not null,
        code_hash text not null check (code_hash ~ '^0x[0-9a-f]{64}$'),
        payer text not null check (payer ~ '^0x[0-9a-f]{40}$'),
        tx_hash text not null,
        reverted_at timestamptz not null,
        primary key (chain_id, code_hash, payer)
      )`.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`
      drop table if exists relayer_code_hash_reverts;
      drop index if exists relayed_authorizations_open_by_relayer`.execute(db);
  },
};
