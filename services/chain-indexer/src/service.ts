import { checkChainRpc, makeProvider } from '@paygate/chain';
import { Gauge, type RunningService, startService } from '@paygate/runtime';
import type { Kysely } from 'kysely';
import { migrations } from '../migrations';
import type { ChainIndexerConfig } from './config';
import { depositAddressConsumer } from './indexer/deposit-addresses';
import { AdvisoryLeadership } from './indexer/leader';
import { IndexerLoop } from './indexer/loop';
import { TransferScanner } from './indexer/scanner';
import type { IndexerDatabase } from './indexer/tables';

export function startChainIndexer(config: ChainIndexerConfig): Promise<RunningService<IndexerDatabase>> {
  const provider = makeProvider(config.rpcUrl, {
    timeoutMs: config.rpcTimeoutMs,
    chainId: config.chainId,
  });
  return startService<IndexerDatabase>({
    name: 'chain-indexer',
    config,
    migrations,
    consumers: () => [depositAddressConsumer(config)],
    readinessChecks: () => [
      {
        name: 'chain',
        check: () => checkChainRpc(provider, config.chainId),
      },
    ],
    background: (ctx) => {
      const scanner = new TransferScanner(ctx.db as Kysely<IndexerDatabase>, provider, config, ctx.logger);
      const leadership = new AdvisoryLeadership(
        config.databaseUrl,
        `chain-indexer:${config.dbSchema}:${config.chainId}`,
        ctx.logger,
      );
      const headGauge = new Gauge({
        name: 'indexer_head_block',
        help: 'Latest head block seen',
        registers: [ctx.metrics.registry],
      });
      const leaderGauge = new Gauge({
        name: 'indexer_is_leader',
        help: '1 when this replica scans the chain',
        registers: [ctx.metrics.registry],
      });
      return [
        new IndexerLoop(scanner, leadership, ctx.logger, {
          pollIntervalMs: config.pollIntervalMs,
          leaderRetryMs: config.leaderRetryMs,
          headGauge,
          leaderGauge,
          onPass: (result) => {
            if (result.published > 0 || result.reorged > 0) ctx.relay.kick();
          },
        }),
        { start: () => undefined, stop: async () => provider.destroy() },
      ];
    },
  });
}
