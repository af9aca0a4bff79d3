import type { Static } from '@sinclair/typebox';
import type { LedgerDb } from '../db';
import type { TransactionLookup } from '../refunds/schemas';
import { callOutcomesOf } from '../views/call-outcomes';

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
