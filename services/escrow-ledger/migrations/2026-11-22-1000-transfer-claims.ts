import { type Kysely, type Migration, sql } from 'kysely';

/**
 * One claim per on-chain transfer, across every channel that can spend it (an x402 proof, the seller
 * middleware's /api/verify, a checkout session, an operator refund of unmatched money): the primary key
 * (chain_id, tx_hash, log_index) lets exactly one channel + reference hold it, whatever the number of replicas.
 * Backfilled from what the ledger already knows: live payments (by their source) and unmatched refunds.
 */
export const transferClaims: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      create table transfer_claims (
        chain_id integer not null,
        tx_hash text not null check (tx_hash ~ '^0x[0-9a-f]{64}$'),
        log_index integer not null check (log_index >= 0),
        claim_id text not null unique,
        channel text not null check (channel in ('x402', 'verify', 'checkout', 'operator_refund')),
        reference text not null check (length(reference) between 1 and 160),
        payer text not null,
        amount_micro bigint not null check (amount_micro > 0),
        claimed_at timestamptz not null,
        primary key (chain_id, tx_hash, log_index)
      );

      insert into transfer_claims (chain_id, tx_hash, log_index, claim_id, channel, reference, payer, amount_micro, claimed_at)
      select distinct on (chain_id, lower(tx_hash), log_index)
          chain_id, lower(tx_hash), log_index, 'clm_' || id,
          case source when 'checkout' then 'checkout' else 'x402' end,
          case source when 'checkout' then coalesce(session_id, payment_id) else network || ':' || lower(tx_hash) end,
          lower(payer), amount_micro, confirmed_at
        from transactions where escrow_status <> 'reversed'
        order by chain_id, lower(tx_hash), log_index, confirmed_at
      on conflict do nothing;

      insert into transfer_claims (chain_id, tx_hash, log_index, claim_id, channel, reference, payer, amount_micro, claimed_at)
      select chain_id, lower(tx_hash), log_index, 'clm_' || id, 'operator_refund',
          'refund:' || transfer_refund_request_id, lower(payer), amount_micro, created_at
        from refunds where kind = 'unmatched_transfer'
      on conflict do nothing;
    `.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`drop table transfer_claims`.execute(db);
  },
};
