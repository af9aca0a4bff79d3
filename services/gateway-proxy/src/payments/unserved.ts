import { enqueueEvent } from '@paygate/bus';
import { createEvent } from '@paygate/contracts';
import { type BackgroundTask, PolledTask, PollingLoop } from '@paygate/runtime';
import { sql, type Transaction } from 'kysely';
import type { GatewayProxyConfig } from '../config';
import type { GatewayContext, GatewayDatabase } from '../db';
import { callFailed } from './call-outcomes';
import { attemptsLiveAfter, retryWindowEnd } from './claim-rows';
import type { PaymentClaim } from './types';

/** Replicas compare the window with their own clocks: a claim is closed this long after it. */
const CLOSE_MARGIN_MS = 5_000;
const INTERVAL_MS = 2_000;
const CLOSE_BATCH = 200;

type ClosedClaim = Pick<PaymentClaim, 'id' | 'seller_id' | 'skill_id' | 'attempts' | 'retry_cause'> & {
  retry_until: Date;
};

/** Closes pay-per-calls whose window passed unserved, booking one never attempted or abandoned as a timeout first. */
export class UnservedCalls extends PolledTask implements BackgroundTask {
  protected readonly loop: PollingLoop;

  constructor(
    private readonly ctx: GatewayContext,
    private readonly settings: Pick<GatewayProxyConfig, 'now' | 'retryWindowSeconds' | 'upstreamTimeoutMs'>,
  ) {
    super();
    this.loop = new PollingLoop(() => this.closeDue(), {
      what: 'closing unserved paid calls',
      logger: ctx.logger,
      intervalMs: INTERVAL_MS,
      maxBackoffMs: 8 * INTERVAL_MS,
    });
  }

  private async closeDue(): Promise<void> {
    const now = this.settings.now();
    const before = new Date(now.getTime() - CLOSE_MARGIN_MS);
    await this.ctx.inTransaction(async (trx) => {
      const failed = await sql<ClosedClaim>`
        update payment_claims set state = 'unserved', updated_at = ${now}
          where id in (select id from payment_claims
            where state = 'retryable' and kind <> 'subscription' and retry_until <= ${before}
            order by retry_until limit ${CLOSE_BATCH} for update skip locked)
          returning id, seller_id, skill_id, attempts, retry_until, retry_cause`.execute(trx);
      const abandoned = await this.closeAbandoned(trx, now, before);
      const neverAttempted = failed.rows.filter((claim) => claim.retry_cause === 'not_attempted');
      for (const claim of [...neverAttempted, ...abandoned]) {
        const data = callFailed(claim, { outcome: 'timeout' }, now, new Date(claim.retry_until));
        await enqueueEvent(trx, createEvent('payment.call_failed', 'gateway-proxy', data));
      }
      for (const claim of [...failed.rows, ...abandoned]) {
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
    });
  }

  /** In flight with no live attempt, past the window: closed, their window kept. */
  private async closeAbandoned(
    trx: Transaction<GatewayDatabase>,
    now: Date,
    before: Date,
  ): Promise<ClosedClaim[]> {
    const window = retryWindowEnd(this.settings.retryWindowSeconds);
    const liveAfter = attemptsLiveAfter(now, this.settings.upstreamTimeoutMs);
    const closed = await sql<ClosedClaim>`
      update payment_claims set state = 'unserved', retry_until = ${window}, updated_at = ${now}
        where id in (select id from payment_claims
          where state = 'in_flight' and kind <> 'subscription' and ${window} <= ${before}
            and updated_at < ${liveAfter}
          order by created_at limit ${CLOSE_BATCH} for update skip locked)
        returning id, seller_id, skill_id, attempts, retry_until, retry_cause`.execute(trx);
    return closed.rows;
  }
}
