import { type Kysely, type Migration, sql } from 'kysely';

/**
 * Frozen migrations for the bus tables, merged into every service's own migration list.
 * Date-prefixed names sort before any service migration of a later date. Never edit one; add a new one.
 */
export const busMigrations: Record<string, Migration> = {
  '2026-11-22-0000-bus-outbox-inbox': {
    async up(db: Kysely<any>) {
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
    async down(db: Kysely<any>) {
      await db.schema.dropTable('inbox').execute();
      await db.schema.dropTable('outbox').execute();
    },
  },
};
