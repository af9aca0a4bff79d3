import { type Kysely, type Migration, sql } from 'kysely';

/** The registry's schema: sellers and their keys, SIWE nonces, skills, endpoints and idempotency records. */
export const baseline: Migration = {
  async up(db: Kysely<unknown>) {
    await sql`
      -- Secrets are stored sealed (*_encrypted); API keys by their hash only.
      -- forwarding_key_encrypted: what the gateway signs forwarded requests with (null until the account's secret
      -- key is issued with one). sessions_revoked_at: dashboard session tokens issued at or before it are refused.
      -- Changes only the account wallet may make, with their grace periods: previous_api_key_* (the key a rotation
      -- replaced stays valid until previous_api_key_expires_at, with its forwarding key, so the gateway signs with
      -- both meanwhile) and pending_payout_* (a payout address signed by the wallet, applied at
      -- pending_payout_effective_at; payout_address stays the one settlement pays until then).
      -- What a seller sees of its API keys (never the key): a name, the last four characters, when it was made and
      -- last used. checkout_matching: how its checkout sessions are matched (seller.updated checkoutMatching).
      create table sellers (
        id text primary key,
        wallet_address text not null check (wallet_address ~ '^0x[0-9a-fA-F]{40}$'),
        payout_address text not null check (payout_address ~ '^0x[0-9a-fA-F]{40}$'),
        api_key_hash text not null unique check (api_key_hash ~ '^[0-9a-f]{64}$'),
        api_key_version integer not null default 1 check (api_key_version >= 1),
        publishable_key text not null unique,
        webhook_url text,
        webhook_secret_encrypted text,
        webhook_secret_version integer not null default 0 check (webhook_secret_version >= 0),
        settlement_frequency text not null default 'DAILY'
          check (settlement_frequency in ('DAILY', 'WEEKLY', 'MONTHLY')),
        minimum_settlement_micro bigint not null default 10000000 check (minimum_settlement_micro >= 0),
        revision integer not null default 1 check (revision >= 1),
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        forwarding_key_encrypted text,
        sessions_revoked_at timestamptz,
        previous_api_key_hash text check (previous_api_key_hash ~ '^[0-9a-f]{64}$'),
        previous_api_key_expires_at timestamptz,
        previous_forwarding_key_encrypted text,
        pending_payout_address text check (pending_payout_address ~ '^0x[0-9a-fA-F]{40}$'),
        pending_payout_effective_at timestamptz,
        api_key_name text not null default 'Secret key' check (char_length(api_key_name) between 1 and 60),
        api_key_hint text check (api_key_hint ~ '^[A-Za-z0-9_-]{4}$'),
        api_key_created_at timestamptz not null default now(),
        api_key_last_used_at timestamptz,
        previous_api_key_name text check (char_length(previous_api_key_name) between 1 and 60),
        previous_api_key_hint text check (previous_api_key_hint ~ '^[A-Za-z0-9_-]{4}$'),
        previous_api_key_created_at timestamptz,
        previous_api_key_last_used_at timestamptz,
        checkout_matching text not null default 'amount' check (checkout_matching in ('amount', 'deposit_address')),
        constraint sellers_check check ((previous_api_key_hash is null) = (previous_api_key_expires_at is null)),
        constraint sellers_check1 check ((pending_payout_address is null) = (pending_payout_effective_at is null))
      );
      create unique index sellers_wallet_unique on sellers (lower(wallet_address));
      create index sellers_previous_api_key on sellers (previous_api_key_hash) where previous_api_key_hash is not null;
      create index sellers_previous_key_due on sellers (previous_api_key_expires_at)
        where previous_api_key_hash is not null;
      create index sellers_pending_payout_due on sellers (pending_payout_effective_at)
        where pending_payout_address is not null;

      create table siwe_nonces (
        nonce text primary key,
        expires_at timestamptz not null
      );
      create index siwe_nonces_expiry on siwe_nonces (expires_at);

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
        status text not null
          check (status in ('PENDING_VALIDATION', 'ACTIVE', 'VALIDATION_FAILED', 'SUSPENDED', 'ARCHIVED')),
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
      );
      create index skills_seller on skills (seller_id, name);
      create index skills_pending on skills (status) where status = 'PENDING_VALIDATION';

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
      );
      create unique index endpoints_route_unique on endpoints (skill_id, method, path) where active;
      create index endpoints_skill on endpoints (skill_id);

      -- An Idempotency-Key is claimed by a row without a response while its first request runs (no connection is
      -- held meanwhile); the response is stored when it finishes.
      create table idempotency_keys (
        seller_id text not null references sellers (id),
        key text not null,
        request_hash text not null,
        response_status integer,
        response_body jsonb,
        created_at timestamptz not null default now(),
        primary key (seller_id, key)
      )`.execute(db);
  },
};
