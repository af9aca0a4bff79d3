import { enqueueEvent } from '@paygate/bus';
import { createEvent } from '@paygate/contracts';
import { type BackgroundTask, PolledTask, PollingLoop } from '@paygate/runtime';
import { sql } from 'kysely';
import type { GatewayContext } from '../db';

/** Replicas compare the window with their own clocks (reopenForRetry): a claim is closed this long after it. */
export const CLOSE_MARGIN_MS = 5_000;
const INTERVAL_MS = 2_000;
/** Claims closed per pass, at most; the rest on the next. */
const CLOSE_BATCH = 200;

/**
 * A pay-per-call left retryable when its retry window passed (its last attempt failed, and nobody presented it
 * again in time) will never be served: it is made final (`unserved`, so no retry can take it over) and the ledger
 * is told (payment.call_unserved) in the same transaction. The ledger decides the refund from what it recorded:
 * a seller failure (payment.call_failed) and no attempt served. A claim still in flight is closed once its attempt
 * ends failed; one served is never closed, so a call is never both served and refunded.
 */
export class UnservedCalls extends PolledTask implements BackgroundTask {
  protected readonly loop: PollingLoop;

  constructor(
    private readonly ctx: GatewayContext,
    private readonly now: () => Date,
  ) {
    super();
    this.loop = new PollingLoop(() => this.closeDue().then(() => undefined), {
      what: 'closing unserved paid calls',
      logger: ctx.logger,
      intervalMs: INTERVAL_MS,
      maxBackoffMs: 8 * INTERVAL_MS,
    });
  }

  /** Closes the claims whose window passed; returns how many. */
  async closeDue(): Promise<number> {
    const now = this.now();
    const before = new Date(now.getTime() - CLOSE_MARGIN_MS);
    return this.ctx.inTransaction(async (trx) => {
      const closed = await sql<{ id: string; seller_id: string; attempts: number; retry_until: Date }>`
        update payment_claims set state = 'unserved', updated_at = ${now}
          where id in (select id from payment_claims
            where state = 'retryable' and kind <> 'subscription' and retry_until <= ${before}
            order by retry_until limit ${CLOSE_BATCH} for update skip locked)
          returning id, seller_id, attempts, retry_until`.execute(trx);
      for (const claim of closed.rows) {
        await enqueueEvent(
          trx,
          createEvent('payment.call_unserved', 'gateway-proxy', {
            paymentId: claim.id,
            sellerId: claim.seller_id,
            attempts: claim.attempts,
            retryUntil: new Date(claim.retry_until).toISOString(),
            closedAt: now.toISOString(),
          }),
        );
      }
      return closed.rows.length;
    });
  }
}
