import { type BackgroundTask, PolledTask, PollingLoop } from '@paygate/runtime';
import type { LedgerContext, LedgerDeps } from '../deps';
import { reconcileWithSettlement } from './reconcile';

/** The operator's reconciliation every RECONCILE_INTERVAL_MS for the alerts (a failed pass sets no gauge). */
export class ReconciliationWatch extends PolledTask implements BackgroundTask {
  protected readonly loop: PollingLoop;

  constructor(ctx: LedgerContext, deps: LedgerDeps) {
    super();
    const intervalMs = deps.config.reconcileIntervalMs;
    this.loop = new PollingLoop(
      async () => {
        await reconcileWithSettlement(ctx, deps);
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
