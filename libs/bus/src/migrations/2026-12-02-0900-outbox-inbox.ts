import { type Kysely, type Migration, sql } from 'kysely';

/**
 * The transactional outbox (events written in the same transaction as the change they announce, published by the
 * relay) and the inbox (one row per event a consumer applied, so a redelivery changes nothing). The relay prunes
 * published outbox rows and old inbox rows oldest first, in bounded batches: hence the two time indexes.
 */
export const outboxInbox: Migration = {
  async up(db: Kysely<unknown>) {
    await sql`
      create table outbox (
        id text primary key,
        subject text not null,
        envelope jsonb not null,
        created_at timestamptz not null default now(),
        published_at timestamptz,
        attempts integer not null default 0
      );
      create index outbox_unpublished on outbox (id) where published_at is null;
      create index outbox_published_at on outbox (published_at) where published_at is not null;

      create table inbox (
        consumer text not null,
        event_id text not null,
        processed_at timestamptz not null default now(),
        constraint inbox_pk primary key (consumer, event_id)
      );
      create index inbox_processed_at on inbox (processed_at)`.execute(db);
  },
};
