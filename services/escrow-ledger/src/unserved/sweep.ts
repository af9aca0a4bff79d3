import { type BackgroundTask, PolledTask, PollingLoop } from '@paygate/runtime';
import type { LedgerContext, LedgerDeps } from '../deps';
import { decideUnserved, sendDueRefunds, undecidedCalls } from './decide';

/**
 * Every UNSERVED_SWEEP_INTERVAL_MS: decides again the unserved calls that could not be decided when their window
 * closed (their failure or payment not booked yet, their seller short of money), then sends every payer's
 * unserved refunds that are due (threshold reached, or the oldest at its maximum age). Each call in its own
 * transaction, so one that fails never holds the others back; bounded per pass (DECIDE_BATCH).
 */
export class UnservedRefundSweep extends PolledTask implements BackgroundTask {
  protected readonly loop: PollingLoop;

  constructor(ctx: LedgerContext, deps: LedgerDeps) {
    super();
    const intervalMs = deps.config.unservedSweepIntervalMs;
    this.loop = new PollingLoop(
      async () => {
        const paymentIds = await ctx.inTransaction((trx) => undecidedCalls(trx));
        for (const paymentId of paymentIds) {
          await ctx.inTransaction((trx) => decideUnserved(trx, deps, paymentId), { retryConflicts: true });
        }
        await ctx.inTransaction((trx) => sendDueRefunds(trx, deps), { retryConflicts: true });
      },
      { what: 'unserved call refunds', logger: ctx.logger, intervalMs, maxBackoffMs: 4 * intervalMs },
    );
  }
}
