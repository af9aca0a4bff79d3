import type { EventData, EventEnvelope } from '@paygate/contracts';
import type { Transaction } from 'kysely';
import type { LedgerDatabase, PaymentCallAttemptsTable } from '../db';

type CallAttempt = Omit<PaymentCallAttemptsTable, 'recorded_at'>;

/** An attempt is recorded once whatever delivers it again (the inbox skips a seen event id; the key a copy). */
async function recordAttempt(trx: Transaction<any>, attempt: CallAttempt): Promise<void> {
  await (trx as Transaction<LedgerDatabase>)
    .insertInto('payment_call_attempts')
    .values(attempt)
    .onConflict((oc) => oc.columns(['payment_id', 'attempt']).doNothing())
    .execute();
}

/** payment.call_failed: the seller failed a paid call; the buyer may retry until retryUntil. */
export function onPaymentCallFailed(
  trx: Transaction<any>,
  event: EventEnvelope<'payment.call_failed', EventData<'payment.call_failed'>>,
): Promise<void> {
  const d = event.data;
  return recordAttempt(trx, {
    payment_id: d.paymentId,
    attempt: d.attempt,
    seller_id: d.sellerId,
    outcome: 'failed',
    upstream_outcome: d.upstreamOutcome,
    upstream_status: d.upstreamStatus,
    at: new Date(d.failedAt),
    retry_until: new Date(d.retryUntil),
    event_id: event.id,
  });
}

/** payment.call_recovered: a retry of a failed call was served within its window. */
export function onPaymentCallRecovered(
  trx: Transaction<any>,
  event: EventEnvelope<'payment.call_recovered', EventData<'payment.call_recovered'>>,
): Promise<void> {
  const d = event.data;
  return recordAttempt(trx, {
    payment_id: d.paymentId,
    attempt: d.attempt,
    seller_id: d.sellerId,
    outcome: 'served',
    upstream_outcome: null,
    upstream_status: d.upstreamStatus,
    at: new Date(d.servedAt),
    retry_until: null,
    event_id: event.id,
  });
}
