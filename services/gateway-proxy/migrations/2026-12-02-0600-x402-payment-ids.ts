import { type Kysely, type Migration, sql } from 'kysely';

/**
 * x402's payment-identifier extension: a client's idempotency key for one purchase. One row per (payer, id), the
 * unique key every replica inserts against: it names the request it was first sent with (a fingerprint of the
 * method, URL, body and price) and the authorization that pays for it, so the same id for the same request is the
 * same purchase (never a second charge) and the same id for another request is refused as a conflict.
 */
export const x402PaymentIds: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      create table x402_payment_ids (
        payer text not null,
        payment_id text not null check (payment_id ~ '^[A-Za-z0-9_-]{16,128}$'),
        fingerprint text not null,
        chain_id integer not null,
        token text not null,
        auth_nonce text not null,
        created_at timestamptz not null,
        updated_at timestamptz not null,
        primary key (payer, payment_id)
      );
      create index x402_payment_ids_created on x402_payment_ids (created_at);
    `.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`drop table x402_payment_ids`.execute(db);
  },
};
