import { type Kysely, type Migration, sql } from 'kysely';

/**
 * `webhook_events.traceparent`: the W3C trace context of the consumer that recorded the event for webhooks, so its
 * deliveries (sent later by the dispatcher's own pass) are spans of the payment's trace. Null for events recorded
 * before, or without a trace. Frozen.
 */
export const webhookTrace: Migration = {
  async up(db: Kysely<any>) {
    await sql`alter table webhook_events add column traceparent text check (length(traceparent) <= 128)`.execute(
      db,
    );
  },
  async down(db: Kysely<any>) {
    await sql`alter table webhook_events drop column traceparent`.execute(db);
  },
};
