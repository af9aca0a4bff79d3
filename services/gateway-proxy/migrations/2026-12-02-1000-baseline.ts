import { type Kysely, type Migration, sql } from 'kysely';

/**
 * The gateway's schema: the skill projection, payment claims, x402 authorizations and payment ids, ticket signing
 * keys, the payers each seller blocks and sign-in-with-x nonces.
 */
export const baseline: Migration = {
  async up(db: Kysely<unknown>) {
    await sql`
      create table skills (
        skill_id text primary key,
        name text not null,
        revision integer not null check (revision >= 1),
        snapshot jsonb not null,
        updated_at timestamptz not null default now()
      );
      create index skills_name_idx on skills (name);

      -- One on-chain transfer pays for one thing: (network, tx_hash) is unique, and the first claim wins.
      -- claimed_via: the payment path it was claimed through (facilitator: a seller using Paygate as its x402
      -- facilitator). A pay-per-call whose retry window passed after its seller failed it is made final, unserved
      -- (no retry can take it over any more, and the ledger refunds it).
      create table payment_claims (
        id text primary key,
        network text not null,
        chain_id integer not null,
        tx_hash text not null check (tx_hash ~ '^0x[0-9a-f]{64}$'),
        log_index integer not null check (log_index >= 0),
        payer text not null,
        token text not null,
        amount_micro bigint not null check (amount_micro > 0),
        seller_id text not null,
        skill_id text,
        skill_name text,
        endpoint_id text,
        resource text not null,
        kind text not null check (kind in ('payPerCall', 'subscription', 'product', 'service')),
        claimed_via text not null check (claimed_via in ('proxy', 'ticket', 'verify', 'facilitator')),
        state text not null check (state in ('in_flight', 'served', 'retryable', 'unserved')),
        access_expires_at timestamptz,
        retry_until timestamptz,
        attempts integer not null default 1 check (attempts between 1 and 50),
        created_at timestamptz not null,
        updated_at timestamptz not null,
        unique (network, tx_hash),
        constraint payment_claims_check check (kind <> 'subscription' or access_expires_at is not null)
      );
      create index payment_claims_retry_due on payment_claims (retry_until) where state = 'retryable';
      -- A payer's subscriptions, found by wallet (sign-in-with-x).
      create index payment_claims_subscriber on payment_claims (lower(payer), access_expires_at)
        where kind = 'subscription';

      -- Signing keys sealed (AES-256-GCM under TICKET_KEY_ENCRYPTION_KEY) in private_key_sealed.
      create table ticket_keys (
        kid text primary key,
        private_key_pem text,
        public_jwk jsonb not null,
        created_at timestamptz not null default now(),
        private_key_sealed text,
        constraint ticket_keys_check check (private_key_pem is not null or private_key_sealed is not null)
      );

      -- x402 payments (EIP-3009 authorizations). One authorization buys one thing: (chain, token, payer, nonce) is
      -- claimed here, with the resource it pays for, before anything is submitted, so of any number of
      -- presentations across replicas exactly one reaches the relayer. Once its transfer is included, the transfer
      -- is claimed in payment_claims like any payment.
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

      -- x402's payment-identifier extension: a client's idempotency key for one purchase, the unique key every
      -- replica inserts against. It names the request it was first sent with (a fingerprint of the method, URL,
      -- body and price) and the authorization that pays for it: the same id for the same request is the same
      -- purchase (never a second charge), the same id for another request a conflict.
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

      -- The payers each seller refuses to sell to: their paid calls are refused before anything is charged.
      create table blocked_payers (
        seller_id text not null,
        payer text not null check (payer ~ '^0x[0-9a-f]{40}$'),
        reason text,
        created_at timestamptz not null,
        primary key (seller_id, payer)
      );

      -- x402's sign-in-with-x: each signed message's nonce is accepted once (the primary key every replica inserts
      -- against) until the message could no longer be accepted anyway (expires_at, after which the row is swept).
      create table siwx_nonces (
        nonce text primary key check (length(nonce) between 8 and 128),
        address text not null,
        domain text not null,
        expires_at timestamptz not null,
        created_at timestamptz not null
      );
      create index siwx_nonces_expires on siwx_nonces (expires_at)`.execute(db);
  },
};
