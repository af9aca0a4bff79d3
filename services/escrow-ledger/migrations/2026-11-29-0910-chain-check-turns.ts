import { type Kysely, type Migration, sql } from 'kysely';

/**
 * `transfers.chain_check_turn`: the order in which the chain confirmation check reads receipts of transfers awaiting
 * the chain. A transfer takes a turn when it is booked and a new one each time it is checked, and each pass reads
 * the lowest turns: the least recently checked first. The check read the oldest bookings first, so transfers the
 * node never answered about (as many as a pass reads) were read again every pass and newer payments never were:
 * held forever. A sequence, not a timestamp: no clock (an injected one, or a replica's) can tie or reorder turns.
 * Transfers awaiting the chain when this runs take their turns in booking order. Frozen.
 */
export const chainCheckTurns: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      create sequence transfers_chain_check_turn;
      alter table transfers add column chain_check_turn bigint;
      alter table transfers alter column chain_check_turn set default nextval('transfers_chain_check_turn');
      update transfers t set chain_check_turn = awaiting.turn
        from (select chain_id, tx_hash, log_index, nextval('transfers_chain_check_turn') as turn
                from (select chain_id, tx_hash, log_index from transfers
                       where chain_confirmed_at is null and status = 'observed'
                       order by observed_at) booked) awaiting
        where t.chain_id = awaiting.chain_id and t.tx_hash = awaiting.tx_hash and t.log_index = awaiting.log_index;
      create index transfers_awaiting_chain_turn on transfers (chain_check_turn)
        where chain_confirmed_at is null and status = 'observed'`.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`
      drop index if exists transfers_awaiting_chain_turn;
      alter table transfers drop column chain_check_turn;
      drop sequence if exists transfers_chain_check_turn`.execute(db);
  },
};
