import { enqueueEvent } from '@paygate/bus';
import { createEvent, type EventData } from '@paygate/contracts';
import { currentTraceCarrier } from '@paygate/telemetry';
import { sql, type Transaction } from 'kysely';
import type { GatewayProxyConfig } from '../config';
import type { GatewayContext, GatewayDatabase } from '../db';
import { attemptOf } from './claim-rows';
import type { PaymentClaim } from './service';

export type SellerFailure =
  | { outcome: 'error_status'; status: number }
  | { outcome: 'timeout' | 'unreachable' | 'misconfigured' };

/** `payment.call_failed` of a claim's latest attempt (the unserved sweep books an abandoned one as a timeout). */
export const callFailed = (
  claim: Pick<PaymentClaim, 'id' | 'seller_id' | 'skill_id' | 'attempts'>,
  failure: SellerFailure,
  failedAt: Date,
  retryUntil: Date,
): EventData<'payment.call_failed'> => ({
  paymentId: claim.id,
  sellerId: claim.seller_id,
  skillId: claim.skill_id,
  attempt: claim.attempts,
  upstreamOutcome: failure.outcome,
  upstreamStatus: failure.outcome === 'error_status' ? failure.status : null,
  failedAt: failedAt.toISOString(),
  retryUntil: retryUntil.toISOString(),
});

/** A forwarded pay-per-call's outcome on its claim row, its event in the same transaction (none for a first success). */
export class CallOutcomes {
  constructor(
    private readonly ctx: GatewayContext,
    private readonly settings: Pick<GatewayProxyConfig, 'retryWindowSeconds' | 'now'>,
  ) {}

  /** Retryable until the returned time (from the first failure); no event without `sellerFailure`. */
  async markFailed(claim: PaymentClaim, sellerFailure: SellerFailure | undefined): Promise<Date | undefined> {
    if (claim.kind === 'subscription') return undefined;
    const now = this.settings.now();
    const freshWindow = new Date(now.getTime() + this.settings.retryWindowSeconds * 1000);
    return this.ctx.inTransaction(async (trx) => {
      const row = (await trx
        .updateTable('payment_claims')
        .set({
          state: 'retryable',
          retry_until: sql`coalesce(retry_until, ${freshWindow})`,
          retry_cause: sellerFailure ? 'seller_failure' : 'buyer_body',
          updated_at: now,
        })
        .where((eb: any) => eb.and(attemptOf(claim)))
        .returning(['retry_until'])
        .executeTakeFirst()) as { retry_until: Date } | undefined;
      if (!row) {
        const current = (await trx
          .selectFrom('payment_claims')
          .select('retry_until')
          .where('id', '=', claim.id)
          .executeTakeFirst()) as { retry_until: Date | null } | undefined;
        return current?.retry_until ?? freshWindow;
      }
      if (sellerFailure) {
        await this.publish(
          trx,
          'payment.call_failed',
          callFailed(claim, sellerFailure, now, row.retry_until),
        );
      }
      return row.retry_until;
    });
  }

  /** A retry of a failed pay-per-call was answered (below 500): spent, and the seller's books told. */
  async markServedAgain(claim: PaymentClaim, upstreamStatus: number): Promise<void> {
    const now = this.settings.now();
    await this.ctx.inTransaction(async (trx) => {
      const row = await trx
        .updateTable('payment_claims')
        .set({ state: 'served', updated_at: now })
        .where((eb: any) => eb.and(attemptOf(claim)))
        .returning(['id'])
        .executeTakeFirst();
      if (!row) return;
      await this.publish(trx, 'payment.call_recovered', {
        paymentId: claim.id,
        sellerId: claim.seller_id,
        attempt: claim.attempts,
        upstreamStatus,
        servedAt: now.toISOString(),
      });
    });
  }

  private publish<S extends 'payment.call_failed' | 'payment.call_recovered'>(
    trx: Transaction<GatewayDatabase>,
    subject: S,
    data: EventData<S>,
  ): Promise<void> {
    return enqueueEvent(trx, createEvent(subject, 'gateway-proxy', data, { trace: currentTraceCarrier() }));
  }
}
