import { type RawBuilder, sql } from 'kysely';

/** A failed call's payment is held back this long after its window at most (a claim the gateway never closed). */
const HOLD_BACK_AFTER_WINDOW = '1 hour';

/**
 * The release condition for a payment whose call its seller failed: held while the buyer may retry and its refund
 * is undecided, so the refund comes from the hold, not the seller's payout; an hour past the window it is released
 * anyway (the gateway never closed the call). `transactions`: the caller's alias of the transactions row.
 */
export function notAwaitingUnservedDecision(transactions: string, now: Date): RawBuilder<unknown> {
  const t = sql.ref(`${transactions}.payment_id`);
  return sql`not exists (select 1 from payment_call_attempts a
      where a.payment_id = ${t} and a.outcome = 'failed'
        and a.retry_until > ${now}::timestamptz - interval '${sql.raw(HOLD_BACK_AFTER_WINDOW)}'
        and not exists (select 1 from payment_call_attempts s where s.payment_id = a.payment_id and s.outcome = 'served')
        and not exists (select 1 from unserved_calls u where u.payment_id = a.payment_id and u.status <> 'closed'))`;
}
