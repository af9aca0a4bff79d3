import { type Kysely, type Migration, sql } from 'kysely';

/**
 * Frozen migrations for the bus tables, merged into every service's own migration list.
 * Date-prefixed names sort before any service migration of a later date. Never edit one; add a new one.
 */
export const busMigrations: Record<string, Migration> = {
  '2026-11-22-0000-bus-outbox-inbox': {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('outbox')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('subject', 'text', (c) => c.notNull())
        .addColumn('envelope', 'jsonb', (c) => c.notNull())
        .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
        .addColumn('published_at', 'timestamptz')
        .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
        .execute();
      await sql`create index outbox_unpublished on outbox (id) where published_at is null`.execute(db);
      await db.schema
        .createTable('inbox')
        .addColumn('consumer', 'text', (c) => c.notNull())
        .addColumn('event_id', 'text', (c) => c.notNull())
        .addColumn('processed_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
        .addPrimaryKeyConstraint('inbox_pk', ['consumer', 'event_id'])
        .execute();
    },
    async down(db: Kysely<unknown>) {
      await db.schema.dropTable('inbox').execute();
      await db.schema.dropTable('outbox').execute();
    },
  },
  '2026-11-22-1101-bus-prune-indexes': {
    // The relay prunes published outbox rows and old inbox rows oldest first, in bounded batches.
    async up(db: Kysely<unknown>) {
      await sql`create index outbox_published_at on outbox (published_at) where published_at is not null`.execute(
        db,
      );
      await sql`create index inbox_processed_at on inbox (processed_at)`.execute(db);
    },
    async down(db: Kysely<unknown>) {
      await sql`drop index inbox_processed_at`.execute(db);
      await sql`drop index outbox_published_at`.execute(db);
    },
  },
};
