import { type Kysely, type Migration, sql } from 'kysely';

/**
 * Sign-out: dashboard session tokens issued at or before this moment are refused (a seller signing out, on any
 * device, ends every session it had). Null: never signed out. Frozen.
 */
export const sessionSignOut: Migration = {
  async up(db: Kysely<any>) {
    await sql`alter table sellers add column sessions_revoked_at timestamptz`.execute(db);
  },
};
