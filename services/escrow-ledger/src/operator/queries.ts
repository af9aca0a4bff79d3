import type { Selectable } from 'kysely';
import type {
  AccountsTable,
  LedgerDb,
  PaymentConflictsTable,
  RefundReceivablesTable,
  RefundsTable,
  TransactionsTable,
  TransfersTable,
} from '../db';

/** The operator's reads, each typed by the table it reads (db.ts): a column's change reaches its view. */

/** Open, resolved or all conflicts, newest first. */
export function listConflicts(
  db: LedgerDb,
  status: 'open' | 'resolved' | 'all',
): Promise<Selectable<PaymentConflictsTable>[]> {
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
export function unclaimedTransfers(db: LedgerDb): Promise<Selectable<TransfersTable>[]> {
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

/** The suspense account's balance (0 before the first transfer). */
export async function suspenseBalance(db: LedgerDb): Promise<bigint> {
  const row = await db
    .selectFrom('accounts')
    .select('balance_micro')
    .where('kind', '=', 'suspense')
    .executeTakeFirst();
  return row?.balance_micro ?? 0n;
}

/** Refunds of unmatched transfers in the status asked for, newest first. */
export function unmatchedRefunds(db: LedgerDb, status: string): Promise<Selectable<RefundsTable>[]> {
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
export async function refundReceivables(
  db: LedgerDb,
  status: string,
): Promise<{ rows: Selectable<RefundReceivablesTable>[]; owedMicro: bigint }> {
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
export function reversedAfterRelease(
  db: LedgerDb,
): Promise<
  Pick<
    Selectable<TransactionsTable>,
    | 'id'
    | 'seller_id'
    | 'payment_id'
    | 'chain_id'
    | 'tx_hash'
    | 'log_index'
    | 'amount_micro'
    | 'seller_share_micro'
    | 'reversal_reason'
    | 'settlement_id'
    | 'released_at'
    | 'reversed_at'
  >[]
> {
  return db
    .selectFrom('transactions')
    .select([
      'id',
      'seller_id',
      'payment_id',
      'chain_id',
      'tx_hash',
      'log_index',
      'amount_micro',
      'seller_share_micro',
      'reversal_reason',
      'settlement_id',
      'released_at',
      'reversed_at',
    ])
    .where('escrow_status', '=', 'reversed')
    .where('released_at', 'is not', null)
    .orderBy('reversed_at', 'desc')
    .orderBy('id', 'desc')
    .limit(200)
    .execute();
}

/** Every account and its balance, by kind and owner. */
export function listAccounts(
  db: LedgerDb,
): Promise<
  Pick<Selectable<AccountsTable>, 'kind' | 'owner' | 'normal_side' | 'floor_micro' | 'balance_micro'>[]
> {
  return db
    .selectFrom('accounts')
    .select(['kind', 'owner', 'normal_side', 'floor_micro', 'balance_micro'])
    .orderBy('kind')
    .orderBy('owner')
    .limit(1000)
    .execute();
}

/** Sets a seller's credit limit (insert or update). */
export async function storeCreditLimit(
  db: LedgerDb,
  sellerId: string,
  limitMicro: bigint,
  now: Date,
): Promise<void> {
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
