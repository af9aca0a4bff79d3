import { type Kysely, type Migration, sql } from 'kysely';

/**
 * Watching finished transactions through the reorg window (issue 19, "Storm-proof"): a relayed authorization is
 * `confirmed` on its first receipt and an outgoing transfer after CONFIRMATIONS blocks, but a reorg can still take
 * either off the chain. `final_at` is set once the transaction is deep enough that no watched reorg can drop it;
 * until then the sender checks its receipt and broadcasts the same signed bytes again when it is gone.
 * Rows finished before this migration are taken as final (they are older than any reorg window).
 */
export const reorgWatch: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      alter table relayed_authorizations add column final_at timestamptz;
      alter table relayed_authorizations add column reorg_rebroadcasts integer not null default 0;
      update relayed_authorizations set final_at = coalesce(finished_at, now()) where status <> 'signed' and status <> 'broadcast';
      create index relayed_authorizations_watched on relayed_authorizations (relayer_nonce)
        where status = 'confirmed' and final_at is null;
      alter table outgoing_transfers add column final_at timestamptz;
      alter table outgoing_transfers add column reorg_rebroadcasts integer not null default 0;
      update outgoing_transfers set final_at = coalesce(confirmed_at, failed_at, now()) where status in ('confirmed', 'failed');
      create index outgoing_transfers_watched on outgoing_transfers (nonce)
        where status = 'confirmed' and final_at is null`.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`
      drop index if exists outgoing_transfers_watched;
      alter table outgoing_transfers drop column final_at, drop column reorg_rebroadcasts;
      drop index if exists relayed_authorizations_watched;
      alter table relayed_authorizations drop column final_at, drop column reorg_rebroadcasts`.execute(db);
  },
};
