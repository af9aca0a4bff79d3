import type { RunningService } from '@paygate/runtime';
import { waitFor } from '@paygate/testing';
import type { JsonRpcProvider } from 'ethers';
import { type Kysely, sql } from 'kysely';
import type { IndexerDatabase } from '../src/indexer/tables';

/**
 * The positive signal before asserting what was NOT published: a pass finished at the chain's current head
 * (the head gauge is set after the pass published what was due) and the relay sent everything it wrote.
 */
export async function indexerCaughtUp(
  indexer: RunningService<IndexerDatabase>,
  db: Kysely<any>,
  provider: Pick<JsonRpcProvider, 'getBlockNumber'>,
): Promise<void> {
  const head = await provider.getBlockNumber();
  await waitFor(
    async () => {
      const gauge = await indexer.ctx.metrics.registry.getSingleMetric('indexer_head_block')?.get();
      const backlog = await sql<{
        n: number;
      }>`select count(*)::int n from outbox where published_at is null`.execute(db);
      return (gauge?.values[0]?.value ?? -1) >= head && backlog.rows[0]!.n === 0;
    },
    { message: `indexer never caught up with block ${head}` },
  );
}
