import { type Kysely, type Migration, sql } from 'kysely';

/**
 * A transfer that another channel spent (an x402 proof, a seller's /api/verify: the ledger's `transfer.claimed`)
 * is not unmatched money: status `claimed` takes it off the operator's unmatched list. `claimed_transfers`
 * remembers such claims even before the transfer itself is observed here, whichever event arrives first.
 */
export const claimedTransfers: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      alter table transfers drop constraint transfers_status_check;
      alter table transfers add constraint transfers_status_check
        check (status in ('matched', 'unmatched', 'attached', 'refund_requested', 'reorged', 'claimed'));
      create table claimed_transfers (
        chain_id integer not null,
        tx_hash text not null,
        log_index integer not null check (log_index >= 0),
        channel text not null,
        claim_id text not null,
        claimed_at timestamptz not null,
        primary key (chain_id, tx_hash, log_index)
      );
    `.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`
      drop table claimed_transfers;
      update transfers set status = 'unmatched' where status = 'claimed';
      alter table transfers drop constraint transfers_status_check;
      alter table transfers add constraint transfers_status_check
        check (status in ('matched', 'unmatched', 'attached', 'refund_requested', 'reorged'));
    `.execute(db);
  },
};
