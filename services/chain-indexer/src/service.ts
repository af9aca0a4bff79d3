import { checkChainRpc, makeProvider } from '@paygate/chain';
import { type RunningService, startService } from '@paygate/runtime';
import { migrations } from '../migrations';
import type { ChainIndexerConfig } from './config';
import { depositAddressConsumer } from './indexer/deposit-addresses';
import { AdvisoryLeadership } from './indexer/leader';
import { IndexerLoop } from './indexer/loop';
import { indexerMetrics } from './indexer/metrics';
import { TransferScanner } from './indexer/scanner';
import type { IndexerDatabase } from './indexer/tables';

/** The chain indexer, built once: the chain's provider, the scanner, leadership and the loop that runs them. */
export function startChainIndexer(config: ChainIndexerConfig): Promise<RunningService<IndexerDatabase>> {
  return startService<IndexerDatabase>({
    name: 'chain-indexer',
    config,
    migrations,
    build(ctx) {
      const provider = makeProvider(config.rpcUrl, {
        timeoutMs: config.rpcTimeoutMs,
        chainId: config.chainId,
      });
      const metrics = indexerMetrics(ctx.metrics.registry);
      const scanner = new TransferScanner(ctx.db, provider, config, ctx.logger, metrics.onReorg);
      // One replica scans at a time: the one holding the chain's advisory lock.
      const leadership = new AdvisoryLeadership(
        config.databaseUrl,
        `chain-indexer:${config.dbSchema}:${config.chainId}`,
        ctx.logger,
      );
      const loop = new IndexerLoop(scanner, leadership, ctx.logger, config, metrics, (result) => {
        if (result.published > 0 || result.reorged > 0) ctx.relay.kick();
      });
      return {
        consumers: [depositAddressConsumer(config)],
        tasks: [loop],
        readinessChecks: [{ name: 'chain', check: () => checkChainRpc(provider, config.chainId) }],
        stop: async () => provider.destroy(),
      };
    },
  });
}
