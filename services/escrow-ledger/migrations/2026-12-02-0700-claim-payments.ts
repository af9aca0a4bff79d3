import { type Kysely, type Migration, sql } from 'kysely';

/**
 * `transfer_claims.payment_id`: the payment booked in the claim's own transaction (`ledger.claim_transfer` with a
 * payment). A repeat of the claim is answered with it, so a retry, a replica's concurrent request or a
 * subscription's re-use never books a second payment. Null for claims that pay for nothing the ledger books
 * (operator refunds, underpaid sessions). Claims made before are given the live payment of their transfer. Frozen.
 */
export const claimPayments: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      alter table transfer_claims add column payment_id text;
      update transfer_claims c set payment_id = t.payment_id
        from transactions t
        where t.chain_id = c.chain_id and t.tx_hash = c.tx_hash and t.log_index = c.log_index
          and t.escrow_status <> 'reversed' and c.claimed_via <> 'operator_refund'`.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`alter table transfer_claims drop column payment_id`.execute(db);
  },
};
