import { sql, type Transaction } from 'kysely';

/** A transfer (chain, transaction, log index) as one block included it. */
export interface TransferInclusion {
  chainId: number;
  txHash: string;
  logIndex: number;
  blockHash: string;
}

/** Serialises a service's handlers of one transfer's events across replicas, with or without a row to lock. */
export async function lockTransferEvents<DB>(
  trx: Transaction<DB>,
  scope: string,
  transfer: Omit<TransferInclusion, 'blockHash'>,
): Promise<void> {
  const key = `${scope}:${transfer.chainId}:${transfer.txHash.toLowerCase()}:${transfer.logIndex}`;
  await sql`select pg_advisory_xact_lock(hashtextextended(${key}, 0))`.execute(trx);
}

/**
 * A reorg can be handled before the observation it reverses (two consumers): a reorg of a transfer the service
 * does not know leaves a tombstone, which the observation of that block takes and is then not applied; a later
 * observation finds none. Call both under lockTransferEvents.
 */
export async function leaveReorgTombstone<DB>(
  trx: Transaction<DB>,
  transfer: TransferInclusion,
  eventId: string,
): Promise<void> {
  await sql`insert into reorg_tombstones (chain_id, tx_hash, log_index, block_hash, event_id)
    values (${transfer.chainId}, ${transfer.txHash.toLowerCase()}, ${transfer.logIndex},
      ${transfer.blockHash.toLowerCase()}, ${eventId})
    on conflict do nothing`.execute(trx);
}

/** Takes the tombstone a reorg left for this inclusion; true when there was one (the observation is stale). */
export async function takeReorgTombstone<DB>(
  trx: Transaction<DB>,
  transfer: TransferInclusion,
): Promise<boolean> {
  const taken = await sql`delete from reorg_tombstones
    where chain_id = ${transfer.chainId} and tx_hash = ${transfer.txHash.toLowerCase()}
      and log_index = ${transfer.logIndex} and block_hash = ${transfer.blockHash.toLowerCase()}`.execute(trx);
  return Number(taken.numAffectedRows ?? 0n) > 0;
}
