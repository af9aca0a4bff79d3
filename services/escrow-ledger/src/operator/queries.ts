import type { LedgerDb, RefundReceivablesTable, RefundsTable } from '../db';

/** The operator's reads, each typed by the table it reads (db.ts): a column's change reaches its view. */

/** Open, resolved or all conflicts, newest first. */
export function listConflicts(db: LedgerDb, status: 'open' | 'resolved' | 'all') {
  let query = db.selectFrom('payment_conflicts').selectAll().orderBy('id', 'desc').limit(200);
  if (status !== 'all') query = query.where('status', '=', status);
  return query.execute();
}

/** Marks a conflict resolved; false when there is no such conflict. */
export async function resolveConflict(db: LedgerDb, id: string): Promise<boolean> {
  const rows = await db
    .updateTable('payment_conflicts')
    .set({ status: 'resolved' })
    .where('id', '=', BigInt(id))
    .returning('id')
    .execute();
  return rows.length > 0;
}

/** Observed transfers no payment claimed and none refunded, newest first. */
export function unclaimedTransfers(db: LedgerDb) {
  return db
    .selectFrom('transfers')
    .selectAll()
    .where('claimed_by_transaction_id', 'is', null)
    .where('refund_id', 'is', null)
    .where('status', '=', 'observed')
    .orderBy('observed_at', 'desc')
    .limit(500)
    .execute();
}

/** Refunds of unmatched transfers in the status asked for, newest first. */
export function unmatchedRefunds(db: LedgerDb, status: string) {
  let query = db
    .selectFrom('refunds')
    .selectAll()
    .where('kind', '=', 'unmatched_transfer')
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(200);
  if (status !== 'all') query = query.where('status', '=', status as RefundsTable['status']);
  return query.execute();
}

/** Payers' receivables in the status asked for, newest first, and what is open now. */
export async function refundReceivables(db: LedgerDb, status: string) {
  let query = db
    .selectFrom('refund_receivables')
    .selectAll()
    .orderBy('created_at', 'desc')
    .orderBy('tx_hash')
    .orderBy('log_index')
    .orderBy('inclusion')
    .limit(200);
  if (status !== 'all') query = query.where('status', '=', status as RefundReceivablesTable['status']);
  const [rows, owed] = await Promise.all([
    query.execute(),
    db
      .selectFrom('refund_receivables')
      .select((eb) => eb.fn.sum<bigint | string | null>('amount_micro').as('owed'))
      .where('status', '=', 'open')
      .executeTakeFirst(),
  ]);
  return { rows, owedMicro: BigInt(owed?.owed ?? 0n) };
}

/** Payments reversed after their hold was released, newest first. */
export function reversedAfterRelease(db: LedgerDb) {
  return db
    .selectFrom('transactions')
    .selectAll()
    .where('escrow_status', '=', 'reversed')
    .where('released_at', 'is not', null)
    .orderBy('reversed_at', 'desc')
    .orderBy('id', 'desc')
    .limit(200)
    .execute();
}

/** Every account and its balance, by kind and owner. */
export function listAccounts(db: LedgerDb) {
  return db
    .selectFrom('accounts')
    .select(['kind', 'owner', 'normal_side', 'floor_micro', 'balance_micro'])
    .orderBy('kind')
    .orderBy('owner')
    .limit(1000)
    .execute();
}

/** Sets a seller's credit limit (insert or update). */
export async function storeCreditLimit(db: LedgerDb, sellerId: string, limitMicro: bigint, now: Date) {
  await db
    .insertInto('seller_credit_limits')
    .values({ seller_id: sellerId, credit_limit_micro: limitMicro, updated_at: now })
    .onConflict((oc) =>
      oc.column('seller_id').doUpdateSet((eb) => ({
        credit_limit_micro: eb.ref('excluded.credit_limit_micro'),
        updated_at: eb.ref('excluded.updated_at'),
      })),
    )
    .execute();
}
