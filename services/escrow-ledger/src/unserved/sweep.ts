import { type BackgroundTask, PolledTask, PollingLoop } from '@paygate/runtime';
import type { LedgerContext, LedgerDeps } from '../deps';
import { decideUnserved, sendDueRefunds, undecidedCalls } from './decide';

/** Decides again the undecided calls, each in its own transaction, then sends the payers' due refunds. */
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
