import { Counter, Gauge, type Registry } from '@paygate/runtime';
import type { ReorgReport } from './scanner';

/** The indexer's own metrics, on the service's registry: the head, leadership and the reorgs rolled back. */
export function indexerMetrics(registry: Registry) {
  const reorgs = new Counter({
    name: 'indexer_reorgs_total',
    help: 'Reorgs rolled back, by how deep they reached: within_confirmations (nothing reported left the chain), past_confirmations (reported transfers reversed), past_window (undone from older known blocks), not_undone (deeper than every block the indexer knows: alert)',
    labelNames: ['reach'],
    registers: [registry],
  });
  const deepest = new Gauge({
    name: 'indexer_reorg_deepest_blocks',
    help: 'Depth of the deepest reorg rolled back since the start (blocks replaced)',
    registers: [registry],
  });
  let deepestSeen = 0;
  return {
    head: new Gauge({ name: 'indexer_head_block', help: 'Latest head block seen', registers: [registry] }),
    leader: new Gauge({
      name: 'indexer_is_leader',
      help: '1 when this replica scans the chain',
      registers: [registry],
    }),
    /** Counts a rollback by its reach and keeps the deepest seen. */
    onReorg(report: ReorgReport): void {
      reorgs.inc({ reach: report.reach });
      deepestSeen = Math.max(deepestSeen, report.depth);
      deepest.set(deepestSeen);
    },
  };
}
