import { type Kysely, type Migration, sql } from 'kysely';

/** The gateway schema: skill projection, payment claims, ticket signing keys, shared rate-limit windows. */
export const gatewayInit: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      create table skills (
        skill_id text primary key,
        name text not null,
        revision integer not null check (revision >= 1),
        snapshot jsonb not null,
        updated_at timestamptz not null default now()
      )`.execute(db);
    await sql`create index skills_name_idx on skills (name)`.execute(db);

    // One on-chain transfer pays for one thing: (network, tx_hash) is unique, and the first claim wins.
    await sql`
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
        channel text not null check (channel in ('proxy', 'ticket', 'verify')),
        state text not null check (state in ('in_flight', 'served', 'retryable')),
        access_expires_at timestamptz,
        retry_until timestamptz,
        attempts integer not null default 1 check (attempts between 1 and 50),
        created_at timestamptz not null,
        updated_at timestamptz not null,
        unique (network, tx_hash),
        check (kind <> 'subscription' or access_expires_at is not null)
      )`.execute(db);

    await sql`
      create table ticket_keys (
        kid text primary key,
        private_key_pem text not null,
        public_jwk jsonb not null,
        created_at timestamptz not null default now()
      )`.execute(db);

    // Fixed one-minute windows shared by every replica.
    await sql`
      create table rate_limit_windows (
        bucket text not null,
        window_start timestamptz not null,
        hits integer not null check (hits >= 0),
        primary key (bucket, window_start)
      )`.execute(db);
  },
  async down(db: Kysely<any>) {
    for (const table of ['rate_limit_windows', 'ticket_keys', 'payment_claims', 'skills']) {
      await sql`drop table if exists ${sql.id(table)}`.execute(db);
    }
  },
};
