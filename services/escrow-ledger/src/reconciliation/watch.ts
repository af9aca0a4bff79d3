import { type BackgroundTask, PolledTask, PollingLoop } from '@paygate/runtime';
import type { LedgerContext, LedgerDeps } from '../deps';
import { reconcileWithSettlement, recordReconciliation } from './reconcile';

/**
 * The reconciliation the operator route runs (GET /api/v1/reconciliation), every RECONCILE_INTERVAL_MS on each
 * replica, so the alerts see a difference, a seller's debt or a payer's without anyone asking: it sets the
 * ledger_reconciliation_* and ledger_*_micro_usdc gauges and logs an error line for a difference. Read-only; a
 * chain or settlement that does not answer fails the pass (retried with backoff) and leaves
 * ledger_reconciliation_last_success_timestamp_seconds where it was, which the staleness alert watches.
 */
export class ReconciliationWatch extends PolledTask implements BackgroundTask {
  protected readonly loop: PollingLoop;

  constructor(ctx: LedgerContext, deps: LedgerDeps) {
    super();
    const intervalMs = deps.config.reconcileIntervalMs;
    this.loop = new PollingLoop(
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
}
