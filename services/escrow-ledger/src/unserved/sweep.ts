import { PollingLoop } from '@paygate/runtime';
import type { LedgerContext, LedgerDeps } from '../deps';
import { decideUnserved, sendDueRefunds, undecidedCalls } from './decide';

/** Decides again the calls left undecided (each in its own transaction), then sends every payer's due refunds. */
export function unservedRefundSweep(ctx: LedgerContext, deps: LedgerDeps): PollingLoop {
  const intervalMs = deps.config.unservedSweepIntervalMs;
  return new PollingLoop(
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
