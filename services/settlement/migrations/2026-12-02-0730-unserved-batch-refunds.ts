import { type Kysely, type Migration, sql } from 'kysely';

/**
 * Refunds of kind `unserved_batch` (refund.initiated): one transfer to a payer carrying the ledger's refunds of
 * paid calls their sellers did not serve; no transaction, no seller (refund_kind_ids). Frozen.
 */
export const unservedBatchRefunds: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      alter table refunds drop constraint refunds_kind_check;
      alter table refunds add constraint refunds_kind_check
        check (kind in ('payment', 'unmatched_transfer', 'unserved_batch'))`.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`
      delete from refunds where kind = 'unserved_batch';
      alter table refunds drop constraint refunds_kind_check;
      alter table refunds add constraint refunds_kind_check check (kind in ('payment', 'unmatched_transfer'))`.execute(
      db,
    );
  },
};
