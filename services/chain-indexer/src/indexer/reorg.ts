import { enqueueEvent } from '@paygate/bus';
import { createEvent } from '@paygate/contracts';
import type { JsonRpcProvider } from 'ethers';
import { type Kysely, type Selectable, sql, type Transaction } from 'kysely';
import { BlockUnavailableError } from '../errors';
import type { IndexerDatabase, RecentBlocksTable } from './tables';
import { type TransferChain, transferEventFields } from './transfer-fields';

type StoredBlock = Pick<Selectable<RecentBlocksTable>, 'number' | 'hash'>;

/** The stored recent block hashes of the chain, newest first, at most `window` of them. */
export function storedRecentBlocks(
  db: Kysely<IndexerDatabase>,
  chainId: number,
  window: number,
): Promise<StoredBlock[]> {
  return db
    .selectFrom('recent_blocks')
    .select(['number', 'hash'])
    .where('chain_id', '=', chainId)
    .orderBy('number', 'desc')
    .limit(window)
    .execute();
}

/** Known blocks below `below` for a reorg deeper than the window: older hashes and published transfers' blocks. */
export async function olderKnownBlocks(
  db: Kysely<IndexerDatabase>,
  chainId: number,
  below: number,
  limit: number,
): Promise<StoredBlock[]> {
  const rows = await sql<{ number: string; hash: string }>`select number, hash from (
        select number, hash from recent_blocks where chain_id = ${chainId} and number < ${below}
        union
        select block_number as number, block_hash as hash from transfers
          where chain_id = ${chainId} and block_number < ${below} and status = 'published') known
      order by number desc limit ${limit}`.execute(db);
  return rows.rows.map((row) => ({ number: BigInt(row.number), hash: row.hash }));
}

/** The newest stored block (newest first in `stored`) whose hash the chain still has; undefined when none. */
export async function canonicalAncestor(
  stored: StoredBlock[],
  head: number,
  provider: Pick<JsonRpcProvider, 'getBlock'>,
): Promise<number | undefined> {
  for (const block of stored) {
    const number = Number(block.number);
    if (number > head) continue; // the chain got shorter: this block is gone
    const onChain = await provider.getBlock(number);
    // A node without a block at or below its own head is not answering for the chain: no verdict on its word.
    if (!onChain) throw new BlockUnavailableError(number, `the node has no block ${number} at head ${head}`);
    if (onChain.hash === block.hash) return number;
  }
  return undefined;
}

/** Above `rollbackTo`: published transfers get `transfer.reorged`, pending ones go; how many reversed. */
export async function rollBackAbove(
  trx: Transaction<IndexerDatabase>,
  chain: TransferChain,
  rollbackTo: number,
): Promise<number> {
  const removed = await trx
    .updateTable('transfers')
    .set({ status: 'reorged', reorged_at: new Date() })
    .where('chain_id', '=', chain.chainId)
    .where('block_number', '>', BigInt(rollbackTo))
    .where('status', '=', 'published')
    .returningAll()
    .execute();
  for (const transfer of removed) {
    const data = { ...transferEventFields(chain, transfer), reorgedAt: new Date().toISOString() };
    await enqueueEvent(trx, createEvent('transfer.reorged', 'chain-indexer', data));
  }
  await trx
    .deleteFrom('transfers')
    .where('chain_id', '=', chain.chainId)
    .where('block_number', '>', BigInt(rollbackTo))
    .where('status', '=', 'pending')
    .execute();
  await trx
    .deleteFrom('recent_blocks')
    .where('chain_id', '=', chain.chainId)
    .where('number', '>', BigInt(rollbackTo))
    .execute();
  return removed.length;
}
