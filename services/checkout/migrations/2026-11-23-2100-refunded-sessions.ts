import { type Kysely, type Migration, sql } from 'kysely';

/**
 * An operator can send the short transfer of an `underpaid` session back to its payer: the session becomes
 * `refunded` (it keeps the transfer it received and returned) and the transfer `refund_requested`, still naming
 * its session. Only `matched` and `attached` transfers must have a session; a `refund_requested` one may.
 */
export const refundedSessions: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      alter table sessions drop constraint sessions_status_check;
      alter table sessions add constraint sessions_status_check
        check (status in ('open', 'paid', 'paid_late', 'underpaid', 'overpaid', 'expired', 'refunded'));
      alter table transfers drop constraint transfers_check;
      alter table transfers add constraint transfers_session_check
        check (case
          when status in ('matched', 'attached') then session_id is not null
          when status = 'refund_requested' then true
          else session_id is null
        end);
    `.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`
      update transfers set session_id = null where status = 'refund_requested';
      update sessions set status = 'underpaid' where status = 'refunded';
      alter table transfers drop constraint transfers_session_check;
      alter table transfers add constraint transfers_check
        check ((status in ('matched', 'attached')) = (session_id is not null));
      alter table sessions drop constraint sessions_status_check;
      alter table sessions add constraint sessions_status_check
        check (status in ('open', 'paid', 'paid_late', 'underpaid', 'overpaid', 'expired'));
    `.execute(db);
  },
};
