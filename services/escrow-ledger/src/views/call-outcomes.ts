import type { Static } from '@sinclair/typebox';
import type { LedgerDatabase, LedgerDb } from '../db';
import type { TransactionLookup } from '../refunds/schemas';
import type { Transaction } from './schemas';

/** What the gateway made of a payment's paid call, beside the transaction. */
export type CallOutcomeView = Pick<
  Static<typeof Transaction>,
  'callStatus' | 'callFailedAt' | 'upstreamOutcome' | 'upstreamStatus' | 'retryUntil' | 'callRecoveredAt'
>;

/** A payment with no reported attempt: its call was served at once (or it is not a forwarded call at all). */
export const SERVED_AT_ONCE: CallOutcomeView = Object.freeze({
  callStatus: 'served',
  callFailedAt: null,
  upstreamOutcome: null,
  upstreamStatus: null,
  retryUntil: null,
  callRecoveredAt: null,
});

type AttemptRow = Pick<
  LedgerDatabase['payment_call_attempts'],
  'payment_id' | 'attempt' | 'outcome' | 'upstream_outcome' | 'upstream_status' | 'at' | 'retry_until'
>;

/** The call outcome of each payment that has reported attempts (the others are SERVED_AT_ONCE). */
export async function callOutcomesOf(
  db: LedgerDb,
  paymentIds: string[],
  now: Date,
): Promise<Map<string, CallOutcomeView>> {
  const outcomes = new Map<string, CallOutcomeView>();
  if (paymentIds.length === 0) return outcomes;
  const rows = await db
    .selectFrom('payment_call_attempts')
    .select(['payment_id', 'attempt', 'outcome', 'upstream_outcome', 'upstream_status', 'at', 'retry_until'])
    .where('payment_id', 'in', paymentIds)
    .orderBy('payment_id')
    .orderBy('attempt')
    .execute();
  const byPayment = new Map<string, AttemptRow[]>();
  for (const row of rows) byPayment.set(row.payment_id, [...(byPayment.get(row.payment_id) ?? []), row]);
  for (const [paymentId, attempts] of byPayment) outcomes.set(paymentId, outcomeOf(attempts, now));
  return outcomes;
}

/** The highest attempt decides (events arrive in any order); the latest failure says how the seller failed. */
export function outcomeOf(attempts: AttemptRow[], now: Date): CallOutcomeView {
  const last = attempts[attempts.length - 1]!;
  const failure = attempts.filter((a) => a.outcome === 'failed').pop();
  if (!failure) return SERVED_AT_ONCE;
  const retryUntil = new Date(failure.retry_until!);
  const served = last.outcome === 'served';
  return {
    callStatus: served ? 'served' : now < retryUntil ? 'failed_retryable' : 'failed',
    callFailedAt: new Date(failure.at).toISOString(),
    upstreamOutcome: failure.upstream_outcome,
    upstreamStatus: failure.upstream_status,
    retryUntil: retryUntil.toISOString(),
    callRecoveredAt: served ? new Date(last.at).toISOString() : null,
  };
}

/** What became of a paid call, as its buyer polls it (TransactionLookup's `outcome` describes each). */
type PaymentOutcome = Pick<
  Static<typeof TransactionLookup>,
  'retryUntil' | 'refundId' | 'refundTxHash' | 'refundedAt' | 'refundReason'
> & { outcome: 'served' | 'retryable' | 'unserved' | 'refund_pending' | 'refunded' | 'not_refunded' };

export async function paymentOutcome(db: LedgerDb, paymentId: string, now: Date): Promise<PaymentOutcome> {
  const call = (await callOutcomesOf(db, [paymentId], now)).get(paymentId);
  const none = { retryUntil: call?.retryUntil ?? null, refundId: null, refundTxHash: null, refundedAt: null };
  const unserved = await db
    .selectFrom('unserved_calls as u')
    .leftJoin('refunds as r', 'r.id', 'u.refund_id')
    .select([
      'u.status',
      'u.decision',
      'u.refund_id',
      'r.status as refund_status',
      'r.refund_tx_hash',
      'r.completed_at',
      'r.reason',
    ])
    .where('u.payment_id', '=', paymentId)
    .executeTakeFirst();
  if (unserved?.refund_id) {
    const sent = unserved.refund_status === 'completed';
    return {
      outcome: sent ? 'refunded' : 'refund_pending',
      retryUntil: none.retryUntil,
      refundId: unserved.refund_id,
      refundTxHash: unserved.refund_tx_hash,
      refundedAt: unserved.completed_at ? new Date(unserved.completed_at).toISOString() : null,
      refundReason: unserved.reason,
    };
  }
  if (unserved?.status === 'closed') return { outcome: 'unserved', ...none, refundReason: null };
  if (unserved?.status === 'not_refundable') {
    return { outcome: 'not_refunded', ...none, refundReason: unserved.decision };
  }
  if (!call || call.callStatus === 'served' || unserved)
    return { outcome: 'served', ...none, refundReason: null };
  return {
    outcome: call.callStatus === 'failed_retryable' ? 'retryable' : 'unserved',
    ...none,
    refundReason: null,
  };
}
