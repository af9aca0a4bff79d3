import { enqueueEvent } from '@paygate/bus';
import { createEvent } from '@paygate/contracts';
import type { Kysely } from 'kysely';
import type { ChainIndexerConfig } from '../config';
import type { IndexerDatabase } from './tables';
import { transferEventFields } from './transfer-fields';

/** Pending transfers published per pass at most; the rest wait for the next pass. */
const PUBLISH_BATCH = 500;

/** `transfer.observed` once for each pending transfer confirmed at `head`, oldest first; returns how many. */
export async function publishConfirmedTransfers(
  db: Kysely<IndexerDatabase>,
  config: Pick<ChainIndexerConfig, 'chainId' | 'network' | 'confirmations'>,
  head: number,
): Promise<number> {
  const confirmedAtOrBelow = head - config.confirmations + 1;
  const due = await db
    .selectFrom('transfers')
    .selectAll()
    .where('chain_id', '=', config.chainId)
    .where('status', '=', 'pending')
    .where('block_number', '<=', BigInt(confirmedAtOrBelow))
    .orderBy('block_number')
    .orderBy('log_index')
    .limit(PUBLISH_BATCH)
    .execute();
  let published = 0;
  for (const transfer of due) {
    await db.transaction().execute(async (trx) => {
      // The conditional update is the exactly-once guard: only one pass (or replica) moves it to published.
      const claimed = await trx
        .updateTable('transfers')
        .set({ status: 'published', published_at: new Date() })
        .where('chain_id', '=', transfer.chain_id)
        .where('block_hash', '=', transfer.block_hash)
        .where('tx_hash', '=', transfer.tx_hash)
        .where('log_index', '=', transfer.log_index)
        .where('status', '=', 'pending')
        .executeTakeFirst();
      if (Number(claimed.numUpdatedRows) !== 1) return;
      const data = {
        ...transferEventFields(config, transfer),
        confirmations: head - Number(transfer.block_number) + 1,
        observedAt: new Date().toISOString(),
      };
      await enqueueEvent(trx, createEvent('transfer.observed', 'chain-indexer', data));
      published++;
    });
  }
  return published;
}
