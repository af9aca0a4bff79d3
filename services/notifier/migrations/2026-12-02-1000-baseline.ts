import { type Kysely, type Migration, sql } from 'kysely';

/**
 * The notifier's schema: its projections (checkout sessions, seller webhook settings), webhook endpoints, the
 * webhook delivery log and the circuit of each target.
 */
export const baseline: Migration = {
  async up(db: Kysely<unknown>) {
    await sql`
      create table sessions (
        session_id text primary key,
        seller_id text not null,
        status text not null,
        snapshot jsonb not null,
        updated_at timestamptz not null
      );

      create table sellers (
        seller_id text primary key,
        revision integer not null check (revision >= 1),
        webhook_url text,
        webhook_secret_version integer not null check (webhook_secret_version >= 0),
        updated_at timestamptz not null
      );

      -- The exact body sent for an event: retries and redeliveries send the same bytes under the same id.
      -- traceparent: the W3C trace context of the consumer that recorded the event, so its deliveries (sent later
      -- by the dispatcher's own pass) are spans of the payment's trace; null without a trace.
      create table webhook_events (
        event_id text primary key,
        seller_id text not null,
        event_type text not null,
        body text not null,
        created_at timestamptz not null,
        traceparent text check (length(traceparent) <= 128)
      );

      -- More than one URL per seller, each with the events it wants and its own signing secret (derived from the
      -- account's, so no secret is stored here), beside the account's own webhook URL.
      create table webhook_endpoints (
        endpoint_id text primary key,
        seller_id text not null,
        url text not null check (char_length(url) between 1 and 2048),
        description text not null default '' check (char_length(description) <= 200),
        events text[] not null check (cardinality(events) between 1 and 32),
        enabled boolean not null default true,
        secret_version integer not null default 1 check (secret_version >= 1),
        created_at timestamptz not null,
        updated_at timestamptz not null,
        deleted_at timestamptz
      );
      create index webhook_endpoints_seller on webhook_endpoints (seller_id) where deleted_at is null;

      -- endpoint_id null: the account's webhook URL. A delivery being sent carries a lease (leased_until), so what a
      -- seller and each of its targets has in flight is counted across replicas.
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
        endpoint_id text references webhook_endpoints (endpoint_id),
        leased_until timestamptz,
        constraint webhook_deliveries_check check ((status = 'pending') = (next_attempt_at is not null)),
        constraint webhook_deliveries_check1 check ((status = 'delivered') = (delivered_at is not null))
      );
      -- One automatic delivery per (event, account URL) and per (event, endpoint); redeliveries are extra rows
      -- pointing at the original.
      create unique index webhook_deliveries_first on webhook_deliveries (event_id, seller_id)
        where redelivery_of is null and endpoint_id is null;
      create unique index webhook_deliveries_first_endpoint on webhook_deliveries (event_id, endpoint_id)
        where redelivery_of is null and endpoint_id is not null;
      create index webhook_deliveries_due on webhook_deliveries (next_attempt_at) where status = 'pending';
      create index webhook_deliveries_seller on webhook_deliveries (seller_id, delivery_id desc);
      create index webhook_deliveries_in_flight on webhook_deliveries (seller_id, leased_until)
        where leased_until is not null;
      -- A dispatch pass visits each (seller, target) queue without reading another's backlog.
      create index webhook_deliveries_target_due on webhook_deliveries
        (seller_id, (coalesce(endpoint_id, '')), next_attempt_at) where status = 'pending';
      create index webhook_deliveries_give_up on webhook_deliveries (give_up_at) where status = 'pending';

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
      );

      create table idempotency_keys (
        seller_id text not null,
        idempotency_key text not null,
        request_hash text not null,
        response_status integer not null,
        response_body jsonb not null,
        created_at timestamptz not null default now(),
        primary key (seller_id, idempotency_key)
      );

      -- The breaker of each target (an endpoint, or '' for the account's webhook URL) that keeps failing.
      create table webhook_circuits (
        seller_id text not null,
        target text not null,
        state text not null check (state in ('closed', 'open', 'half_open')),
        consecutive_failures integer not null check (consecutive_failures >= 0),
        open_count integer not null default 0 check (open_count >= 0),
        opened_at timestamptz,
        retry_at timestamptz,
        probe_until timestamptz,
        last_error text,
        updated_at timestamptz not null,
        primary key (seller_id, target),
        constraint webhook_circuits_check check ((state = 'closed') = (retry_at is null))
      );
      create index webhook_circuits_not_closed on webhook_circuits (seller_id, target) where state <> 'closed'`.execute(
      db,
    );
  },
};
