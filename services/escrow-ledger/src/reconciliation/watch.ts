import { PollingLoop } from '@paygate/runtime';
import type { LedgerContext, LedgerDeps } from '../deps';
import { reconcileWithSettlement, recordReconciliation } from './reconcile';

/**
 * The operator route's reconciliation every RECONCILE_INTERVAL_MS on each replica, for the alerts' gauges. A chain or
 * settlement that does not answer fails the pass, leaving the last-success gauge that the staleness alert watches.
 */
export function reconciliationWatch(ctx: LedgerContext, deps: LedgerDeps): PollingLoop {
  const intervalMs = deps.config.reconcileIntervalMs;
  return new PollingLoop(
    async () => {
      recordReconciliation(deps, ctx, await reconcileWithSettlement(ctx, deps));
    },
    {
      what: 'periodic reconciliation',
      logger: ctx.logger,
      intervalMs,
      // Not at start-up, with every replica at once after a rollout: one interval in.
      firstDelayMs: intervalMs,
      maxBackoffMs: 4 * intervalMs,
    },
  );
}
