import { checkChainRpc, makeProvider } from '@paygate/chain';
import { Counter, Gauge, type RunningService, startService } from '@paygate/runtime';
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
      const reorgs = new Counter({
        name: 'indexer_reorgs_total',
        help: 'Reorgs rolled back, by how deep they reached: within_confirmations (nothing reported left the chain), past_confirmations (reported transfers reversed), past_window (undone from older known blocks), not_undone (deeper than every block the indexer knows: alert)',
        labelNames: ['reach'],
        registers: [ctx.metrics.registry],
      });
      const deepest = new Gauge({
        name: 'indexer_reorg_deepest_blocks',
        help: 'Depth of the deepest reorg rolled back since the start (blocks replaced)',
        registers: [ctx.metrics.registry],
      });
      let deepestSeen = 0;
      const scanner = new TransferScanner(
        ctx.db as Kysely<IndexerDatabase>,
        provider,
        config,
        ctx.logger,
        (report) => {
          reorgs.inc({ reach: report.reach });
          deepestSeen = Math.max(deepestSeen, report.depth);
          deepest.set(deepestSeen);
        },
      );
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
