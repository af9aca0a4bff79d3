import { type Kysely, type Migration, sql } from 'kysely';

/**
 * Marking an unmatched transfer for refund publishes `transfer.refund_requested` (the ledger books it and
 * settlement sends the money back). The request id is kept on the transfer: one per transfer, unique, and a
 * transfer can only be `refund_requested` with one (NOT VALID: rows marked before the refund was automated keep
 * their recorded decision without an id).
 */
export const transferRefundRequests: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      alter table transfers add column refund_request_id text;
      create unique index transfers_refund_request on transfers (refund_request_id) where refund_request_id is not null;
      alter table transfers add constraint refund_requested_has_request
        check (status <> 'refund_requested' or refund_request_id is not null) not valid;
    `.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`
      alter table transfers drop constraint refund_requested_has_request;
      drop index transfers_refund_request;
      alter table transfers drop column refund_request_id;
    `.execute(db);
  },
};
