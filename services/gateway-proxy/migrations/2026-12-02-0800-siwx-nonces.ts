import { type Kysely, type Migration, sql } from 'kysely';

/**
 * x402's sign-in-with-x: a subscriber proves its wallet with a signed message instead of paying again. Each
 * message's nonce is accepted once (the primary key every replica inserts against) until the message could no
 * longer be accepted anyway (`expires_at`, after which the row is swept). The payer's subscriptions are found by
 * wallet: an index on the payer of subscription claims.
 */
export const siwxNonces: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      create table siwx_nonces (
        nonce text primary key check (length(nonce) between 8 and 128),
        address text not null,
        domain text not null,
        expires_at timestamptz not null,
        created_at timestamptz not null
      );
      create index siwx_nonces_expires on siwx_nonces (expires_at);
      create index payment_claims_subscriber on payment_claims (lower(payer), access_expires_at)
        where kind = 'subscription';
    `.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`
      drop index payment_claims_subscriber;
      drop table siwx_nonces;
    `.execute(db);
  },
};
