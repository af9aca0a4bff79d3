import type { EventEnvelope } from '@paygate/contracts';
import type { LedgerDatabase, LedgerTrx } from '../db';
import type { TypedEnvelope } from '../deps';

type CallAttemptEvent = EventEnvelope<
  'payment.call_failed' | 'payment.call_recovered',
  { paymentId: string; attempt: number; sellerId: string }
>;
type CallOutcome = Omit<
  LedgerDatabase['payment_call_attempts'],
  'recorded_at' | 'payment_id' | 'attempt' | 'seller_id' | 'event_id'
>;

/** Recorded once per (payment, attempt), whatever delivers it again (the inbox skips a seen event id). */
async function recordAttempt(trx: LedgerTrx, event: CallAttemptEvent, outcome: CallOutcome): Promise<void> {
  const d = event.data;
  await trx
    .insertInto('payment_call_attempts')
    .values({
      payment_id: d.paymentId,
      attempt: d.attempt,
      seller_id: d.sellerId,
      ...outcome,
      event_id: event.id,
    })
    .onConflict((oc) => oc.columns(['payment_id', 'attempt']).doNothing())
    .execute();
}

/** payment.call_failed: the seller failed a paid call; the buyer may retry until retryUntil. */
export function onPaymentCallFailed(
  trx: LedgerTrx,
  event: TypedEnvelope<'payment.call_failed'>,
): Promise<void> {
  const d = event.data;
  return recordAttempt(trx, event, {
    outcome: 'failed',
    upstream_outcome: d.upstreamOutcome,
    upstream_status: d.upstreamStatus,
    at: new Date(d.failedAt),
    retry_until: new Date(d.retryUntil),
  });
}

/** payment.call_recovered: a retry of a failed call was served within its window. */
export function onPaymentCallRecovered(
  trx: LedgerTrx,
  event: TypedEnvelope<'payment.call_recovered'>,
): Promise<void> {
  const d = event.data;
  return recordAttempt(trx, event, {
    outcome: 'served',
    upstream_outcome: null,
    upstream_status: d.upstreamStatus,
    at: new Date(d.servedAt),
    retry_until: null,
  });
}
