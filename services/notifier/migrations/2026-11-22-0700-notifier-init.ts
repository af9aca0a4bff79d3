import { type Kysely, type Migration, sql } from 'kysely';

/**
 * The notifier's own projections (checkout sessions, seller webhook settings) and its webhook delivery log.
 * Frozen: later changes are new migrations.
 */
export const notifierInit: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      create table sessions (
        session_id text primary key,
        seller_id text not null,
        status text not null,
        snapshot jsonb not null,
        updated_at timestamptz not null
      )`.execute(db);

    await sql`
      create table sellers (
        seller_id text primary key,
        revision integer not null check (revision >= 1),
        webhook_url text,
        webhook_secret_version integer not null check (webhook_secret_version >= 0),
        updated_at timestamptz not null
      )`.execute(db);

    // The exact body sent for an event: retries and redeliveries send the same bytes under the same id.
    await sql`
      create table webhook_events (
        event_id text primary key,
        seller_id text not null,
        event_type text not null,
        body text not null,
        created_at timestamptz not null
      )`.execute(db);

    await sql`
      create table webhook_deliveries (
        delivery_id text primary key,
        event_id text not null references webhook_events (event_id),
        seller_id text not null,
        url text not null,
        status text not null check (status in ('pending', 'delivered', 'failed')),
        attempt_count integer not null default 0 check (attempt_count >= 0),
        next_attempt_at timestamptz,
        give_up_at timestamptz not null,
        last_status_code integer,
        last_error text,
        redelivery_of text references webhook_deliveries (delivery_id),
        created_at timestamptz not null,
        delivered_at timestamptz,
        check ((status = 'pending') = (next_attempt_at is not null)),
        check ((status = 'delivered') = (delivered_at is not null))
      )`.execute(db);
    // One automatic delivery per (event, seller); redeliveries are extra rows pointing at the original.
    await sql`create unique index webhook_deliveries_first on webhook_deliveries (event_id, seller_id) where redelivery_of is null`.execute(
      db,
    );
    await sql`create index webhook_deliveries_due on webhook_deliveries (next_attempt_at) where status = 'pending'`.execute(
      db,
    );
    await sql`create index webhook_deliveries_seller on webhook_deliveries (seller_id, delivery_id desc)`.execute(
      db,
    );

    await sql`
      create table webhook_attempts (
        delivery_id text not null references webhook_deliveries (delivery_id),
        attempt_number integer not null check (attempt_number >= 1),
        attempted_at timestamptz not null,
        duration_ms integer not null check (duration_ms >= 0),
        status_code integer,
        outcome text not null check (outcome in ('delivered', 'retryable', 'permanent')),
        error text,
        response_excerpt text,
        primary key (delivery_id, attempt_number)
      )`.execute(db);

    await sql`
      create table idempotency_keys (
        seller_id text not null,
        idempotency_key text not null,
        request_hash text not null,
        response_status integer not null,
        response_body jsonb not null,
        created_at timestamptz not null default now(),
        primary key (seller_id, idempotency_key)
      )`.execute(db);
  },
  async down(db: Kysely<any>) {
    for (const table of [
      'idempotency_keys',
      'webhook_attempts',
      'webhook_deliveries',
      'webhook_events',
      'sellers',
      'sessions',
    ]) {
      await sql`drop table if exists ${sql.id(table)}`.execute(db);
    }
  },
};
