import { type Kysely, type Migration, sql } from 'kysely';

/**
 * An unmatched transfer an operator refunded, then dropped by a reorg: the refund left escrow (or will: a booked
 * refund is sent), the transfer's money never arrived. Its amount is reversed out of escrow_asset against what its
 * payer owes back, so the ledger stays at the chain and the loss is on the books, by payer:
 * - account kind `refund_receivable` (debit-normal, floor 0, owner = the payer's address): refunds paid out for
 *   money a reorg took back;
 * - `refund_receivables`: one row per dropped inclusion of such a transfer (open), settled when the same transaction
 *   is mined again (its money arrives again and pays the debt; it stays the refunded transfer), by the transfer
 *   inclusion that settled it. One arrival settles one receivable at most.
 */
export const refundReceivables: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      insert into account_kinds (kind, normal_side, floor_micro, description) values
        ('refund_receivable', 'debit', 0,
          'refunds sent to a payer for a transfer a reorg then dropped: owed back by that payer (owner = payer address)');

      create table refund_receivables (
        chain_id integer not null,
        tx_hash text not null,
        log_index integer not null,
        inclusion integer not null,
        refund_id text not null references refunds (id),
        payer text not null,
        amount_micro bigint not null check (amount_micro > 0),
        status text not null check (status in ('open', 'settled')),
        created_at timestamptz not null,
        settled_at timestamptz,
        settled_by_log_index integer,
        settled_by_inclusion integer,
        primary key (chain_id, tx_hash, log_index, inclusion),
        constraint settled_by_an_arrival check ((status = 'settled') = (settled_at is not null
          and settled_by_log_index is not null and settled_by_inclusion is not null))
      );
      create index refund_receivables_open on refund_receivables (chain_id, tx_hash) where status = 'open';
      create unique index refund_receivables_settled_once
        on refund_receivables (chain_id, tx_hash, settled_by_log_index, settled_by_inclusion) where status = 'settled';
    `.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`drop table refund_receivables;
      delete from account_kinds where kind = 'refund_receivable';`.execute(db);
  },
};
