import { type Kysely, type Migration, sql } from 'kysely';

/**
 * A refund is either of a seller's payment (transaction and seller known) or of an unmatched transfer into escrow
 * that an operator sends back (no transaction, no seller). `kind` comes from refund.initiated and goes back out
 * on refund.completed.
 */
export const unmatchedTransferRefunds: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      alter table refunds add column kind text not null default 'payment' check (kind in ('payment', 'unmatched_transfer'));
      alter table refunds alter column transaction_id drop not null;
      alter table refunds alter column seller_id drop not null;
      alter table refunds add constraint refund_kind_ids check (
        (kind = 'payment') = (transaction_id is not null and seller_id is not null));
    `.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`
      delete from refunds where kind = 'unmatched_transfer';
      alter table refunds drop constraint refund_kind_ids;
      alter table refunds alter column transaction_id set not null;
      alter table refunds alter column seller_id set not null;
      alter table refunds drop column kind;
    `.execute(db);
  },
};
