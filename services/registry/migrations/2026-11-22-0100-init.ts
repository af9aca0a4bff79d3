import { type Kysely, type Migration, sql } from 'kysely';

/** Sellers, SIWE nonces, skills, endpoints and idempotency records of the registry. Frozen: add a new file to change. */
export const init: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      create table sellers (
        id text primary key,
        wallet_address text not null,
        payout_address text not null check (payout_address ~ '^0x[0-9a-fA-F]{40}$'),
        api_key_hash text not null unique check (api_key_hash ~ '^[0-9a-f]{64}$'),
        api_key_version integer not null default 1 check (api_key_version >= 1),
        publishable_key text not null unique,
        webhook_url text,
        webhook_secret_encrypted text,
        webhook_secret_version integer not null default 0 check (webhook_secret_version >= 0),
        settlement_frequency text not null default 'DAILY' check (settlement_frequency in ('DAILY', 'WEEKLY', 'MONTHLY')),
        minimum_settlement_micro bigint not null default 10000000 check (minimum_settlement_micro >= 0),
        revision integer not null default 1 check (revision >= 1),
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        check (wallet_address ~ '^0x[0-9a-fA-F]{40}$')
      )`.execute(db);
    await sql`create unique index sellers_wallet_unique on sellers (lower(wallet_address))`.execute(db);

    await sql`
      create table siwe_nonces (
        nonce text primary key,
        expires_at timestamptz not null
      )`.execute(db);
    await sql`create index siwe_nonces_expiry on siwe_nonces (expires_at)`.execute(db);

    await sql`
      create table skills (
        id text primary key,
        seller_id text not null references sellers (id),
        name text not null unique check (name ~ '^[a-z0-9]+(-[a-z0-9]+)*$' and length(name) <= 64),
        display_name text not null,
        description text not null check (length(description) >= 10),
        api_base_url text not null,
        mode text not null check (mode in ('PROXY', 'TICKET')),
        type text not null check (type in ('API', 'SaaS', 'Product', 'Service', 'Subscription', 'Content')),
        categories text[] not null default '{}',
        duration_days integer check (duration_days is null or duration_days >= 1),
        requires_shipping boolean,
        hold_period_hours integer not null check (hold_period_hours between 0 and 168),
        status text not null check (status in ('PENDING_VALIDATION', 'ACTIVE', 'VALIDATION_FAILED', 'SUSPENDED', 'ARCHIVED')),
        status_reason text,
        revision integer not null default 1 check (revision >= 1),
        validation_seq integer not null default 1,
        validation_lease_until timestamptz,
        health_checked_at timestamptz,
        skill_md text not null default '',
        skill_md_version integer not null default 0,
        skill_md_source text not null default 'generated' check (skill_md_source in ('generated', 'manual')),
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      )`.execute(db);
    await sql`create index skills_seller on skills (seller_id, name)`.execute(db);
    await sql`create index skills_pending on skills (status) where status = 'PENDING_VALIDATION'`.execute(db);

    await sql`
      create table endpoints (
        id text primary key,
        position bigint generated always as identity,
        skill_id text not null references skills (id),
        path text not null check (path like '/%'),
        method text not null check (method in ('GET', 'POST', 'PUT', 'PATCH', 'DELETE')),
        description text not null,
        price_micro bigint not null check (price_micro > 0),
        is_healthy boolean not null default true,
        active boolean not null default true,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      )`.execute(db);
    await sql`create unique index endpoints_route_unique on endpoints (skill_id, method, path) where active`.execute(
      db,
    );
    await sql`create index endpoints_skill on endpoints (skill_id)`.execute(db);

    await sql`
      create table idempotency_keys (
        seller_id text not null references sellers (id),
        key text not null,
        request_hash text not null,
        response_status integer not null,
        response_body jsonb not null,
        created_at timestamptz not null default now(),
        primary key (seller_id, key)
      )`.execute(db);
  },
  async down(db: Kysely<any>) {
    for (const table of ['idempotency_keys', 'endpoints', 'skills', 'siwe_nonces', 'sellers']) {
      await sql`drop table if exists ${sql.id(table)}`.execute(db);
    }
  },
};
