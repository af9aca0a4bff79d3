import { type AnyRoute, badRequest, defineRoute, notFound } from '@paygate/http';
import { formatUsdc } from '@paygate/money';
import type { SellerAuth } from '@paygate/seller-auth';
import type { Static } from '@sinclair/typebox';
import { sql } from 'kysely';
import type { AccountKind, LedgerDb, Row, TransactionRow } from '../db';
import type { LedgerContext } from '../deps';
import { SELLER_ERRORS, TransactionIdParam } from '../http/schemas';
import { refundView } from '../refunds/book';
import { type CallOutcomeView, callOutcomesOf, SERVED_AT_ONCE } from './call-outcomes';
import { Balances, TransactionDetail, TransactionList, TransactionListQuery } from './schemas';

const iso = (value: Date | null) => (value ? new Date(value).toISOString() : null);

/** One status a seller reads: refund state wins over where the money sits. */
export function transactionStatus(row: TransactionRow): string {
  if (row.escrow_status === 'reversed') return 'reversed';
  if (row.refunded_micro > 0n && row.refunded_micro === row.amount_micro) return 'refunded';
  if (row.refunded_micro > 0n) return 'partially_refunded';
  return row.escrow_status === 'payout_pending' ? 'settling' : row.escrow_status;
}

export function transactionView(row: TransactionRow, call: CallOutcomeView = SERVED_AT_ONCE) {
  return {
    transactionId: row.id,
    status: transactionStatus(row),
    escrowStatus: row.escrow_status === 'payout_pending' ? 'settling' : row.escrow_status,
    amount: formatUsdc(row.amount_micro),
    sellerAmount: formatUsdc(row.seller_share_micro),
    platformFee: formatUsdc(row.platform_share_micro),
    refundedAmount: formatUsdc(row.refunded_micro),
    refundableAmount: formatUsdc(
      row.escrow_status === 'reversed' ? 0n : row.amount_micro - row.refunded_micro,
    ),
    payer: row.payer,
    source: row.source,
    paymentId: row.payment_id,
    skillId: row.skill_id,
    skillName: row.skill_name,
    sessionId: row.session_id,
    network: row.network,
    chainId: row.chain_id,
    txHash: row.tx_hash,
    logIndex: row.log_index,
    holdPeriodHours: row.hold_period_hours,
    holdUntil: iso(row.hold_until),
    settlementId: row.settlement_id,
    confirmedAt: iso(row.confirmed_at),
    releasedAt: iso(row.released_at),
    settledAt: iso(row.settled_at),
    reversedAt: iso(row.reversed_at),
    createdAt: iso(row.created_at),
    ...call,
  };
}

const HISTORY_EVENTS: Record<string, string> = {
  payment: 'payment_held',
  release: 'released',
  refund: 'refund_booked',
  refund_sent: 'refund_sent',
  payment_reversal: 'payment_reversed',
};

/** A valid-looking date that is not a real one (2026-02-30) is still a 400 naming the field. */
function queryTime(text: string, field: string): Date {
  const time = new Date(text.length === 10 ? `${text}T00:00:00Z` : text);
  if (Number.isNaN(time.getTime()) || time.toISOString().slice(0, 10) !== text.slice(0, 10)) {
    const rule = 'must be an ISO date (2026-11-22) or UTC date-time (2026-11-22T10:00:00Z)';
    throw badRequest(field, rule, `${field} is not a real date`);
  }
  return time;
}

/** What a transactions page is filtered by (the list route's query, checked); `escrow`: settling is payout_pending. */
function transactionFilter(query: Static<typeof TransactionListQuery>) {
  const status = query.status ?? null;
  return {
    limit: query.limit === undefined ? 50 : Number(query.limit),
    cursor: query.cursor ?? null,
    escrow: status === 'settling' ? 'payout_pending' : status,
    from: query.confirmedFrom ? queryTime(query.confirmedFrom, 'confirmedFrom') : null,
    before: query.confirmedBefore ? queryTime(query.confirmedBefore, 'confirmedBefore') : null,
    skill: query.skill ?? null,
    txHash: query.txHash?.toLowerCase() ?? null,
  };
}

/** The seller's transactions by the filter, newest first: one more than the page, to tell if another follows. */
async function transactionRows(
  db: LedgerDb,
  sellerId: string,
  f: ReturnType<typeof transactionFilter>,
): Promise<TransactionRow[]> {
  const { cursor, from, before, skill, txHash, escrow } = f;
  const rows = await sql<TransactionRow>`select * from transactions where seller_id = ${sellerId}
        and (${cursor}::text is null or id < ${cursor})
        and (${from}::timestamptz is null or confirmed_at >= ${from})
        and (${before}::timestamptz is null or confirmed_at < ${before})
        and (${skill}::text is null or skill_name = ${skill})
        and (${txHash}::text is null or tx_hash = ${txHash})
        and (${escrow}::text is null
          or (${escrow} = 'refunded' and refunded_micro = amount_micro)
          or (${escrow} = 'partially_refunded' and refunded_micro > 0 and refunded_micro < amount_micro and escrow_status <> 'reversed')
          or (escrow_status = ${escrow} and (refunded_micro = 0 or escrow_status = 'reversed')))
        order by id desc limit ${f.limit + 1}`.execute(db);
  return rows.rows;
}

/** The transaction's journal entries as events, then its settlement (if settled). */
async function transactionHistory(db: LedgerDb, row: TransactionRow) {
  // An entry without a debit posting (none is booked so) would have no amount.
  const entries = await sql<
    Row<'journal_entries', 'entry_type' | 'created_at'> & {
      memo: Record<string, unknown> | null;
      amount_micro: bigint | null;
    }
  >`
        select e.entry_type, e.created_at, e.memo,
               (select sum(amount_micro)::bigint from postings p where p.entry_id = e.id and p.side = 'debit') as amount_micro
          from journal_entries e where e.transaction_id = ${row.id} order by e.id`.execute(db);
  const history = entries.rows.map((e) => ({
    type: HISTORY_EVENTS[e.entry_type] ?? e.entry_type,
    amount: formatUsdc(e.amount_micro ?? 0n),
    at: iso(e.created_at),
    ...(e.memo?.refundId ? { refundId: e.memo.refundId } : {}),
  }));
  if (row.settled_at)
    history.push({
      type: 'settled',
      amount: formatUsdc(row.seller_share_micro),
      at: iso(row.settled_at),
    });
  return history;
}

async function transactionDetail(db: LedgerDb, row: TransactionRow, now: () => Date) {
  const history = await transactionHistory(db, row);
  const refunds = await db
    .selectFrom('refunds')
    .selectAll()
    .where('transaction_id', '=', row.id)
    .orderBy('created_at')
    .execute();
  const calls = await callOutcomesOf(db, [row.payment_id], now());
  return { ...transactionView(row, calls.get(row.payment_id)), history, refunds: refunds.map(refundView) };
}

/** The seller's balances: held, available, settling, settled, and owed (an available balance below zero). */
async function sellerBalances(db: LedgerDb, sellerId: string) {
  // One statement, one snapshot: a hold released between separate reads would show its money both held and available.
  const rows = await sql<{ kind: AccountKind | null; balance_micro: bigint }>`
    select kind, balance_micro from accounts
      where owner = ${sellerId} and kind in ('seller_held', 'seller_available', 'seller_payout_pending')
    union all
    select null, coalesce(sum(amount_micro), 0)::bigint from payout_reservations
      where seller_id = ${sellerId} and status = 'completed'`.execute(db);
  const balance = (kind: AccountKind | null) =>
    BigInt(rows.rows.find((r) => r.kind === kind)?.balance_micro ?? 0n);
  const held = balance('seller_held');
  const available = balance('seller_available');
  const payoutPending = balance('seller_payout_pending');
  return {
    sellerId,
    currency: 'USDC',
    held: formatUsdc(held),
    available: formatUsdc(available > 0n ? available : 0n),
    settling: formatUsdc(payoutPending),
    settled: formatUsdc(balance(null)),
    owed: formatUsdc(available < 0n ? -available : 0n),
  };
}

/** Seller reads; `now` decides whether a failed call's retry window is still open (callStatus). */
export function viewRoutes(ctx: LedgerContext, auth: SellerAuth, now: () => Date): AnyRoute[] {
  const seller = { scheme: 'apiKey', middleware: auth.middleware() };
  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/transactions',
      operationId: 'listTransactions',
      summary: "The calling seller's transactions, newest first, by cursor",
      auth: seller,
      query: TransactionListQuery,
      responses: { '200': { description: 'a page of transactions', schema: TransactionList } },
      errors: { '400': 'invalid_request: bad status, limit or cursor', ...SELLER_ERRORS },
      handler: async (req, res) => {
        const filter = transactionFilter(req.query);
        const rows = await transactionRows(ctx.db, req.seller!.sellerId, filter);
        const page = rows.slice(0, filter.limit);
        const calls = await callOutcomesOf(
          ctx.db,
          page.map((row) => row.payment_id),
          now(),
        );
        res.json({
          data: page.map((row) => transactionView(row, calls.get(row.payment_id))),
          nextCursor: rows.length > filter.limit ? page[page.length - 1]!.id : null,
        });
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/transactions/:id',
      operationId: 'getTransaction',
      summary: 'One transaction with its history and refunds',
      auth: seller,
      params: TransactionIdParam,
      responses: { '200': { description: 'the transaction', schema: TransactionDetail } },
      errors: { ...SELLER_ERRORS, '404': 'not_found' },
      handler: async (req, res) => {
        const row = await ctx.db
          .selectFrom('transactions')
          .selectAll()
          .where('id', '=', req.params.id)
          .where('seller_id', '=', req.seller!.sellerId)
          .executeTakeFirst();
        if (!row) throw notFound('transaction');
        res.json(await transactionDetail(ctx.db, row, now));
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/balances',
      operationId: 'getBalances',
      summary: "The calling seller's balances: held, available, settling, settled, owed",
      auth: seller,
      responses: { '200': { description: 'the balances', schema: Balances } },
      errors: SELLER_ERRORS,
      handler: async (req, res) => {
        res.json(await sellerBalances(ctx.db, req.seller!.sellerId));
      },
    }),
  ];
}
