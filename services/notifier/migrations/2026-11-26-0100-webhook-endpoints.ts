import { type Kysely, type Migration, sql } from 'kysely';

/**
 * Webhook endpoints: more than one URL per seller, each with the events it wants and its own signing secret
 * (derived from the account's, so no secret is stored here). The account's single webhook URL stays as it was
 * (deliveries with no endpoint_id). Frozen.
 */
export const webhookEndpoints: Migration = {
  async up(db: Kysely<any>) {
    await sql`
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
      )`.execute(db);
    await sql`create index webhook_endpoints_seller on webhook_endpoints (seller_id) where deleted_at is null`.execute(
      db,
    );
    await sql`alter table webhook_deliveries add column endpoint_id text references webhook_endpoints (endpoint_id)`.execute(
      db,
    );
    // One automatic delivery per (event, account URL) and per (event, endpoint).
    await sql`drop index webhook_deliveries_first`.execute(db);
    await sql`create unique index webhook_deliveries_first on webhook_deliveries (event_id, seller_id) where redelivery_of is null and endpoint_id is null`.execute(
      db,
    );
    await sql`create unique index webhook_deliveries_first_endpoint on webhook_deliveries (event_id, endpoint_id) where redelivery_of is null and endpoint_id is not null`.execute(
      db,
    );
  },
};
