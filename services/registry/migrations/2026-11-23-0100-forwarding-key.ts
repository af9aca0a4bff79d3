import { type Kysely, type Migration, sql } from 'kysely';

/**
 * The seller's forwarding key (what the gateway signs forwarded requests with), sealed like the webhook secret.
 * Null for an account whose secret key was issued before this migration, until that key is rotated. Frozen.
 */
export const forwardingKey: Migration = {
  async up(db: Kysely<any>) {
    await sql`alter table sellers add column forwarding_key_encrypted text`.execute(db);
  },
};
