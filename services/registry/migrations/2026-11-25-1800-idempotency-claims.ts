import { type Kysely, sql } from 'kysely';

/**
 * An Idempotency-Key is claimed by a row without a response while its first request runs (no connection is held
 * while it runs); the response is stored when it finishes.
 */
export const idempotencyClaims = {
  async up(db: Kysely<any>) {
    await sql`alter table idempotency_keys alter column response_status drop not null`.execute(db);
    await sql`alter table idempotency_keys alter column response_body drop not null`.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`delete from idempotency_keys where response_status is null`.execute(db);
    await sql`alter table idempotency_keys alter column response_status set not null`.execute(db);
    await sql`alter table idempotency_keys alter column response_body set not null`.execute(db);
  },
};
