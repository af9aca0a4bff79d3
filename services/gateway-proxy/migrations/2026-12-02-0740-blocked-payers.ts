import { type Kysely, type Migration, sql } from 'kysely';

/**
 * The payers each seller refuses to sell to (PUT /api/v1/blocked-payers/:address): their paid calls are refused
 * before anything is charged. Payer addresses lowercase. Frozen.
 */
export const blockedPayers: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      create table blocked_payers (
        seller_id text not null,
        payer text not null check (payer ~ '^0x[0-9a-f]{40}$'),
        reason text,
        created_at timestamptz not null,
        primary key (seller_id, payer)
      )`.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`drop table blocked_payers`.execute(db);
  },
};
