import { enqueueEvent } from '@paygate/bus';
import { createEvent } from '@paygate/contracts';
import { HttpError } from '@paygate/http';
import { formatUsdc } from '@paygate/money';
import { PollingLoop } from '@paygate/runtime';
import { type NotNull, sql, type Updateable } from 'kysely';
import type { Checked, LedgerDatabase, LedgerTrx, Row, TransactionRow } from '../db';
import type { LedgerContext, LedgerDeps, TypedEnvelope } from '../deps';
import { newRefundId } from '../ids';
import { UnservedDecision } from '../reasons';
import { bookRefund } from '../refunds/book';

// A paid call is unserved when its seller failed it (5xx, timeout, no connection, no valid URL) and its retry window
// closed with none served; a 4xx is service. It is refunded in full, without the seller's approval, once.

/** A closed call whose failure or payment the ledger has not heard of this long after is given up. */
const GIVE_UP_AFTER_MS = 60 * 60_000;
/** Calls decided per sweep pass, and refunds one batch transfer carries, at most. */
const DECIDE_BATCH = 100;
const BATCH_MEMBERS = 500;

type UnservedRow = Row<'unserved_calls', 'payment_id' | 'seller_id' | 'status' | 'recorded_at'>;

/** payment.call_unserved: the call's window closed unserved; recorded once, then decided (now or by the sweep). */
export async function onPaymentCallUnserved(
  trx: LedgerTrx,
  event: TypedEnvelope<'payment.call_unserved'>,
  deps: LedgerDeps,
): Promise<void> {
  const d = event.data;
  const inserted = await trx
    .insertInto('unserved_calls')
    .values({
      payment_id: d.paymentId,
      seller_id: d.sellerId,
      attempts: d.attempts,
      retry_until: new Date(d.retryUntil),
      closed_at: new Date(d.closedAt),
      status: 'closed',
      event_id: event.id,
      recorded_at: deps.now(),
      checked_at: deps.now(),
    })
    .onConflict((oc) => oc.column('payment_id').doNothing())
    .executeTakeFirst();
  if (Number(inserted.numInsertedOrUpdatedRows ?? 0n) === 0) return;
  const payer = await decideUnserved(trx, deps, d.paymentId);
  if (payer) await sendDueRefunds(trx, deps, payer);
}

function updateCall(trx: LedgerTrx, paymentId: string, set: Updateable<LedgerDatabase['unserved_calls']>) {
  return trx.updateTable('unserved_calls').set(set).where('payment_id', '=', paymentId).execute();
}

type Decision =
  | { kind: 'wait' }
  | { kind: 'final'; status: 'served' | 'not_refundable'; decision: UnservedDecision }
  | { kind: 'refund'; txn: TransactionRow; amountMicro: bigint };

/**
 * Decides one closed call under its row's lock: refunds it (returns its payer), marks it served or not refundable,
 * or leaves it closed for the next pass. Only a `closed` row is decided, so never twice.
 */
export async function decideUnserved(
  trx: LedgerTrx,
  deps: LedgerDeps,
  paymentId: string,
): Promise<string | undefined> {
  const locked = await sql<UnservedRow>`select payment_id, seller_id, status, recorded_at from unserved_calls
      where payment_id = ${paymentId} and status = 'closed' for update skip locked`.execute(trx);
  const row = locked.rows[0];
  if (!row) return undefined;
  const now = deps.now();
  const decision = await decisionOf(trx, row, now);
  if (decision.kind === 'wait') {
    await updateCall(trx, paymentId, { checked_at: now });
    return undefined;
  }
  if (decision.kind === 'final') {
    await updateCall(trx, paymentId, {
      status: decision.status,
      decision: decision.decision,
      decided_at: now,
    });
    if (decision.status === 'not_refundable') {
      deps.logger.warn({ paymentId, decision: decision.decision }, 'unserved call not refunded');
    }
    return undefined;
  }
  return bookUnservedRefund(trx, deps, row, decision, now);
}

async function decisionOf(trx: LedgerTrx, row: UnservedRow, now: Date): Promise<Decision> {
  const attempts = await trx
    .selectFrom('payment_call_attempts')
    .select('outcome')
    .where('payment_id', '=', row.payment_id)
    .orderBy('attempt')
    .execute();
  const givenUp = now.getTime() - new Date(row.recorded_at).getTime() > GIVE_UP_AFTER_MS;
  if (attempts.some((a) => a.outcome === 'served')) {
    return { kind: 'final', status: 'served', decision: UnservedDecision.ServedOnRetry };
  }
  if (!attempts.some((a) => a.outcome === 'failed')) {
    // The failure is on another consumer of the bus: it may still be on its way. Without one, only the buyer's
    // body failed (too large, incomplete): not the seller's failure.
    return givenUp
      ? { kind: 'final', status: 'not_refundable', decision: UnservedDecision.NoSellerFailure }
      : { kind: 'wait' };
  }
  const found = await sql<TransactionRow>`select * from transactions
      where payment_id = ${row.payment_id} and escrow_status <> 'reversed' order by created_at desc limit 1 for update`.execute(
    trx,
  );
  const txn = found.rows[0];
  if (!txn) {
    // Booked a moment after its claim, or reversed by a reorg (nothing arrived, nothing to give back).
    return givenUp
      ? { kind: 'final', status: 'not_refundable', decision: UnservedDecision.PaymentNotBooked }
      : { kind: 'wait' };
  }
  const amountMicro = txn.amount_micro - txn.refunded_micro;
  if (amountMicro <= 0n)
    return { kind: 'final', status: 'not_refundable', decision: UnservedDecision.AlreadyRefunded };
  return { kind: 'refund', txn, amountMicro };
}

function latestFailure(trx: LedgerTrx, paymentId: string) {
  return (
    trx
      .selectFrom('payment_call_attempts')
      .select(['upstream_outcome', 'upstream_status'])
      .where('payment_id', '=', paymentId)
      .where('outcome', '=', 'failed')
      // A failed attempt always names its upstream outcome (the table's check).
      .$narrowType<{ upstream_outcome: NotNull }>()
      .orderBy('attempt', 'desc')
      .limit(1)
      .executeTakeFirstOrThrow()
  );
}

/**
 * The refund of all that remains, within what the seller still has with Paygate (bookRefund's check); a seller
 * without the money: the call stays closed and is tried each pass (`awaiting_seller_funds`), never paid by others.
 */
async function bookUnservedRefund(
  trx: LedgerTrx,
  deps: LedgerDeps,
  row: UnservedRow,
  decision: Extract<Decision, { kind: 'refund' }>,
  now: Date,
): Promise<string | undefined> {
  const { txn, amountMicro } = decision;
  const failure = await latestFailure(trx, row.payment_id);
  await sql`savepoint unserved_refund`.execute(trx);
  let refundId: string;
  try {
    const refund = await bookRefund(trx, deps, txn, {
      amountMicro,
      reason: `unserved: ${failure.upstream_outcome}${failure.upstream_status ? ` ${failure.upstream_status}` : ''}`,
      initiate: false,
    });
    refundId = refund.id;
  } catch (error) {
    if (!(error instanceof HttpError) || error.status !== 409) throw error;
    await sql`rollback to savepoint unserved_refund`.execute(trx);
    await updateCall(trx, row.payment_id, {
      decision: `awaiting_seller_funds: ${error.code}`,
      checked_at: now,
    });
    deps.logger.warn(
      { paymentId: row.payment_id, transactionId: txn.id, code: error.code },
      'unserved call: the refund waits for the seller to have the money',
    );
    return undefined;
  }
  await sql`release savepoint unserved_refund`.execute(trx);
  await updateCall(trx, row.payment_id, {
    status: 'refunded',
    decision: 'refunded',
    transaction_id: txn.id,
    refund_id: refundId,
    payer: txn.payer,
    amount_micro: amountMicro,
    decided_at: now,
  });
  await enqueueEvent(
    trx,
    createEvent('payment.refunded', 'escrow-ledger', {
      refundId,
      transactionId: txn.id,
      paymentId: row.payment_id,
      sellerId: txn.seller_id,
      payer: txn.payer,
      amount: formatUsdc(amountMicro),
      reason: 'unserved',
      upstreamOutcome: failure.upstream_outcome,
      upstreamStatus: failure.upstream_status,
      txHash: txn.tx_hash,
      refundedAt: now.toISOString(),
    }),
  );
  return txn.payer;
}

/**
 * Sends a payer's (or every due payer's) unserved refunds as one escrow transfer once they reach
 * UNSERVED_REFUND_THRESHOLD or the oldest waited UNSERVED_REFUND_MAX_AGE_MS; returns the batches made.
 */
export async function sendDueRefunds(trx: LedgerTrx, deps: LedgerDeps, payer?: string): Promise<number> {
  const now = deps.now();
  const oldestBefore = new Date(now.getTime() - deps.config.unservedRefundMaxAgeMs);
  // A refunded call names its payer and amount (the table's check).
  const due = await sql<Checked<Row<'unserved_calls', 'payer'>, 'payer'>>`select payer from unserved_calls
      where status = 'refunded' and batch_id is null and (${payer ?? null}::text is null or payer = ${payer ?? null})
      group by payer
      having sum(amount_micro) >= ${deps.config.unservedRefundThresholdMicro} or min(decided_at) <= ${oldestBefore}
      limit ${DECIDE_BATCH}`.execute(trx);
  let batches = 0;
  for (const { payer: to } of due.rows) {
    const members = await sql<
      Checked<Row<'unserved_calls', 'payment_id' | 'amount_micro'>, 'amount_micro'>
    >`select payment_id, amount_micro
        from unserved_calls where status = 'refunded' and batch_id is null and payer = ${to}
        order by decided_at limit ${BATCH_MEMBERS} for update skip locked`.execute(trx);
    if (members.rows.length === 0) continue;
    const amountMicro = members.rows.reduce((sum, m) => sum + BigInt(m.amount_micro), 0n);
    const batchId = newRefundId();
    const memberIds = members.rows.map((m) => m.payment_id);
    await trx
      .insertInto('refunds')
      .values({
        id: batchId,
        kind: 'unserved_batch',
        transaction_id: null,
        seller_id: null,
        payer: to,
        chain_id: deps.config.chainId,
        amount_micro: amountMicro,
        seller_part_micro: 0n,
        platform_part_micro: 0n,
        phase: 'batch',
        reason: `unserved: ${members.rows.length} call(s)`,
        status: 'pending',
        created_at: now,
      })
      .execute();
    await trx
      .updateTable('unserved_calls')
      .set({ batch_id: batchId })
      .where('payment_id', 'in', memberIds)
      .execute();
    await enqueueEvent(
      trx,
      createEvent('refund.initiated', 'escrow-ledger', {
        refundId: batchId,
        kind: 'unserved_batch',
        transactionId: null,
        sellerId: null,
        payer: to,
        amount: formatUsdc(amountMicro),
        chainId: deps.config.chainId,
        initiatedAt: now.toISOString(),
      }),
    );
    batches += 1;
  }
  return batches;
}

/** The closed calls to decide again, least recently tried first (those that keep waiting never block others). */
async function undecidedCalls(trx: LedgerTrx): Promise<string[]> {
  const rows = await trx
    .selectFrom('unserved_calls')
    .select('payment_id')
    .where('status', '=', 'closed')
    .orderBy('checked_at')
    .limit(DECIDE_BATCH)
    .execute();
  return rows.map((r) => r.payment_id);
}

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
