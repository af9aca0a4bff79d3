import { type AnyRoute, defineRoute, HttpError, notFound, operatorAuth } from '@paygate/http';
import { formatUsdc } from '@paygate/money';
import type { LedgerContext, LedgerDeps } from '../deps';
import { OPERATOR_ERRORS, usdcField } from '../http/schemas';
import { accountBalance } from '../ledger/entries';
import { LedgerReason } from '../reasons';
import { reconcileWithSettlement, recordReconciliation } from '../reconciliation/reconcile';
import {
  AccountList,
  ConflictIdParam,
  ConflictList,
  ConflictListQuery,
  ConflictResolved,
  CreditLimit,
  CreditLimitBody,
  ReconciliationReport,
  RefundReceivableList,
  RefundReceivableListQuery,
  ReversedAfterReleaseList,
  SellerIdParam,
  Suspense,
  UnmatchedRefundList,
  UnmatchedRefundListQuery,
} from './schemas';

const iso = (value: Date) => new Date(value).toISOString();

/** The on-chain transfer a row names, as every operator list shows it. */
const transferOf = (r: { chain_id: number; tx_hash: string | null; log_index: number | null }) => ({
  chainId: r.chain_id,
  txHash: r.tx_hash,
  logIndex: r.log_index,
});

type OperatorRouteKit = ReturnType<typeof operatorRouteKit>;

function operatorRouteKit(ctx: LedgerContext, deps: LedgerDeps) {
  const operator = { scheme: 'operatorToken', middleware: operatorAuth(deps.config.operatorToken) };
  return { ctx, deps, db: ctx.db, operator };
}

/** The operator's routes (operator token): conflicts, suspense, refunds of unmatched transfers, reconciliation. */
export function operatorRoutes(ctx: LedgerContext, deps: LedgerDeps): AnyRoute[] {
  const kit = operatorRouteKit(ctx, deps);
  return [
    listConflictsRoute,
    resolveConflictRoute,
    getSuspenseRoute,
    listUnmatchedRefundsRoute,
    listRefundReceivablesRoute,
    listReversedAfterReleaseRoute,
    listAccountsRoute,
    reconcileRoute,
    setSellerCreditLimitRoute,
  ].map((route) => route(kit));
}

function listConflictsRoute({ db, operator }: OperatorRouteKit): AnyRoute {
  return defineRoute({
    method: 'get',
    path: '/api/v1/operator/ledger/conflicts',
    operationId: 'listConflicts',
    summary: 'Operator: payments the ledger refused to credit (nothing was credited for them)',
    auth: operator,
    query: ConflictListQuery,
    responses: { '200': { description: 'the conflicts', schema: ConflictList } },
    errors: { '400': 'invalid_request (bad status)', ...OPERATOR_ERRORS },
    handler: async (req, res) => {
      const status = req.query.status ?? 'open';
      let query = db.selectFrom('payment_conflicts').selectAll().orderBy('id', 'desc').limit(200);
      if (status !== 'all') query = query.where('status', '=', status);
      const rows = await query.execute();
      res.json({
        data: rows.map((r) => ({
          conflictId: String(r.id),
          kind: r.kind,
          status: r.status,
          ...transferOf(r),
          paymentId: r.payment_id,
          source: r.source,
          sellerId: r.seller_id,
          amount: r.amount_micro === null ? null : formatUsdc(r.amount_micro),
          existingTransactionId: r.existing_transaction_id,
          detail: r.detail,
          createdAt: iso(r.created_at),
        })),
      });
    },
  });
}

function resolveConflictRoute({ db, operator }: OperatorRouteKit): AnyRoute {
  return defineRoute({
    method: 'post',
    path: '/api/v1/operator/ledger/conflicts/:id/resolve',
    operationId: 'resolveConflict',
    summary: 'Operator: mark a conflict resolved (books nothing)',
    auth: operator,
    params: ConflictIdParam,
    responses: { '200': { description: 'resolved', schema: ConflictResolved } },
    errors: { '400': 'invalid_request (bad id)', ...OPERATOR_ERRORS, '404': 'not_found' },
    handler: async (req, res) => {
      const { id } = req.params;
      const resolved = await db
        .updateTable('payment_conflicts')
        .set({ status: 'resolved' })
        .where('id', '=', BigInt(id))
        .returning('id')
        .execute();
      if (resolved.length === 0) throw notFound('conflict');
      res.json({ conflictId: id, status: 'resolved' });
    },
  });
}

function getSuspenseRoute({ db, operator }: OperatorRouteKit): AnyRoute {
  return defineRoute({
    method: 'get',
    path: '/api/v1/operator/ledger/suspense',
    operationId: 'getSuspense',
    summary: 'Operator: money that reached the escrow wallet and that no payment has claimed',
    auth: operator,
    responses: { '200': { description: 'suspense balance and unclaimed transfers', schema: Suspense } },
    errors: OPERATOR_ERRORS,
    handler: async (_req, res) => {
      const [transfers, balanceMicro] = await Promise.all([
        db
          .selectFrom('transfers')
          .selectAll()
          .where('claimed_by_transaction_id', 'is', null)
          .where('refund_id', 'is', null)
          .where('status', '=', 'observed')
          .orderBy('observed_at', 'desc')
          .limit(500)
          .execute(),
        accountBalance(db, 'suspense'),
      ]);
      res.json({
        balance: formatUsdc(balanceMicro),
        data: transfers.map((r) => ({
          ...transferOf(r),
          from: r.from_address,
          amount: formatUsdc(r.amount_micro),
          observedAt: iso(r.observed_at),
        })),
      });
    },
  });
}

function listUnmatchedRefundsRoute({ db, operator }: OperatorRouteKit): AnyRoute {
  return defineRoute({
    method: 'get',
    path: '/api/v1/operator/ledger/unmatched-refunds',
    operationId: 'listUnmatchedRefunds',
    summary:
      'Operator: refunds of transfers that no payment claimed (checkout transfer.refund_requested), booked out of suspense and sent back to the payer by settlement',
    auth: operator,
    query: UnmatchedRefundListQuery,
    responses: { '200': { description: 'the refunds, newest first', schema: UnmatchedRefundList } },
    errors: { ...OPERATOR_ERRORS, '400': 'invalid_request (status)' },
    handler: async (req, res) => {
      const status = req.query.status ?? 'all';
      let query = db
        .selectFrom('refunds')
        .selectAll()
        .where('kind', '=', 'unmatched_transfer')
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc')
        .limit(200);
      if (status !== 'all') query = query.where('status', '=', status);
      const rows = await query.execute();
      res.json({
        data: rows.map((r) => ({
          refundId: r.id,
          kind: r.kind,
          status: r.status,
          ...transferOf(r),
          payer: r.payer,
          amount: formatUsdc(r.amount_micro),
          reason: r.reason,
          refundRequestId: r.transfer_refund_request_id,
          refundTxHash: r.refund_tx_hash,
          createdAt: iso(r.created_at),
          completedAt: r.completed_at ? iso(r.completed_at) : null,
        })),
      });
    },
  });
}

function listRefundReceivablesRoute({ db, operator }: OperatorRouteKit): AnyRoute {
  return defineRoute({
    method: 'get',
    path: '/api/v1/operator/ledger/refund-receivables',
    operationId: 'listRefundReceivables',
    summary:
      'Operator: what payers owe back: refunds of unmatched transfers that a reorg then dropped (the refund left escrow, the money never arrived), open until the same transaction is mined again',
    description:
      'Each row is one dropped inclusion of a refunded unmatched transfer, booked out of escrow_asset against refund_receivable (so the ledger stays at the chain); the reorg_after_refund conflict names the same transfer. Open: the operator recovers it from the payer or writes it off. Settled: the transaction was mined again and its money paid the debt.',
    auth: operator,
    query: RefundReceivableListQuery,
    responses: {
      '200': {
        description: 'the receivables, newest first, and what is owed now',
        schema: RefundReceivableList,
      },
    },
    errors: { ...OPERATOR_ERRORS, '400': 'invalid_request (status)' },
    handler: async (req, res) => {
      const status = req.query.status ?? 'open';
      let query = db
        .selectFrom('refund_receivables')
        .selectAll()
        .orderBy('created_at', 'desc')
        .orderBy('tx_hash')
        .orderBy('log_index')
        .orderBy('inclusion')
        .limit(200);
      if (status !== 'all') query = query.where('status', '=', status);
      const [rows, owed] = await Promise.all([
        query.execute(),
        db
          .selectFrom('refund_receivables')
          .select((eb) => eb.fn.sum<bigint | string | null>('amount_micro').as('owed'))
          .where('status', '=', 'open')
          .executeTakeFirst(),
      ]);
      res.json({
        owed: formatUsdc(BigInt(owed?.owed ?? 0n)),
        data: rows.map((r) => ({
          ...transferOf(r),
          inclusion: r.inclusion,
          status: r.status,
          payer: r.payer,
          amount: formatUsdc(r.amount_micro),
          refundId: r.refund_id,
          createdAt: iso(r.created_at),
          settledAt: r.settled_at ? iso(r.settled_at) : null,
          settledBy:
            r.status === 'settled'
              ? { logIndex: r.settled_by_log_index, inclusion: r.settled_by_inclusion }
              : null,
        })),
      });
    },
  });
}

// A hold is released only once its transfer is CONFIRMATIONS deep: a payment reversed after its release is a
// reorg deeper than that (the money may have been paid out; the seller owes it back).
function listReversedAfterReleaseRoute({ db, operator }: OperatorRouteKit): AnyRoute {
  return defineRoute({
    method: 'get',
    path: '/api/v1/operator/ledger/reversed-after-release',
    operationId: 'listReversedAfterRelease',
    summary:
      'Operator: payments reversed after their hold was released: their transfer left the chain deeper than CONFIRMATIONS (a reorg beyond what the holds wait for)',
    description:
      'The seller\'s available balance was debited by the reversal (negative = owed back, recovered from later settlements; reconciliation\'s exposure). Each one also counted in ledger_payment_conflicts_total{kind="reversed_after_release"} and logged as an error.',
    auth: operator,
    responses: { '200': { description: 'the reversals, newest first', schema: ReversedAfterReleaseList } },
    errors: { ...OPERATOR_ERRORS },
    handler: async (_req, res) => {
      const rows = await db
        .selectFrom('transactions')
        .selectAll()
        .where('escrow_status', '=', 'reversed')
        .where('released_at', 'is not', null)
        .orderBy('reversed_at', 'desc')
        .orderBy('id', 'desc')
        .limit(200)
        .execute();
      res.json({
        data: rows.map((r) => ({
          transactionId: r.id,
          sellerId: r.seller_id,
          paymentId: r.payment_id,
          ...transferOf(r),
          amount: formatUsdc(r.amount_micro),
          sellerShare: formatUsdc(r.seller_share_micro),
          reversalReason: r.reversal_reason,
          settlementId: r.settlement_id,
          releasedAt: iso(r.released_at!),
          reversedAt: iso(r.reversed_at!),
        })),
      });
    },
  });
}

function listAccountsRoute({ db, operator }: OperatorRouteKit): AnyRoute {
  return defineRoute({
    method: 'get',
    path: '/api/v1/operator/ledger/accounts',
    operationId: 'listAccounts',
    summary: 'Operator: every ledger account and its balance',
    auth: operator,
    responses: { '200': { description: 'the accounts', schema: AccountList } },
    errors: OPERATOR_ERRORS,
    handler: async (_req, res) => {
      const rows = await db
        .selectFrom('accounts')
        .select(['kind', 'owner', 'normal_side', 'floor_micro', 'balance_micro'])
        .orderBy('kind')
        .orderBy('owner')
        .limit(1000)
        .execute();
      res.json({
        data: rows.map((r) => ({
          kind: r.kind,
          owner: r.owner || null,
          normalSide: r.normal_side,
          floor: r.floor_micro === null ? null : formatUsdc(r.floor_micro),
          balance: formatUsdc(r.balance_micro),
        })),
      });
    },
  });
}

function reconcileRoute({ ctx, deps, operator }: OperatorRouteKit): AnyRoute {
  return defineRoute({
    method: 'get',
    path: '/api/v1/reconciliation',
    operationId: 'reconcile',
    summary: "Operator: compare the ledger with the escrow wallet's on-chain USDC balance and with itself",
    description:
      "Lists every difference: escrow_asset vs the chain, the trial balance, each account vs the sum of its postings, and any seller balance (held + available) below zero (paid with other sellers' money: exposure.uncovered). A difference also sets the gauge ledger_reconciliation_differences and logs an error.",
    auth: operator,
    responses: {
      '200': {
        description: 'the report (balanced: false lists the differences)',
        schema: ReconciliationReport,
      },
    },
    errors: { ...OPERATOR_ERRORS, '503': 'chain_unavailable: the chain could not be read' },
    handler: async (_req, res) => {
      const report = await reconcileWithChain(ctx, deps);
      recordReconciliation(deps, ctx, report);
      res.json(report);
    },
  });
}

// Escrow is shared: a seller's balance goes below zero (refunds beyond what it has) only by an operator's credit.
function setSellerCreditLimitRoute({ ctx, deps, db, operator }: OperatorRouteKit): AnyRoute {
  return defineRoute({
    method: 'put',
    path: '/api/v1/operator/ledger/sellers/:sellerId/credit-limit',
    operationId: 'setSellerCreditLimit',
    summary: "Operator: how far below zero a seller's balance may go through refunds (default 0)",
    description:
      "A refund is paid only from what the seller still has with Paygate (held + available) plus this credit; beyond it the refund is refused (409 insufficient_seller_balance). Credit lets the seller's debt be paid with other sellers' money in escrow: reconciliation reports it as exposure.",
    auth: operator,
    params: SellerIdParam,
    body: CreditLimitBody,
    bodyExamples: { credit: { creditLimit: '25' }, none: { creditLimit: '0' } },
    responses: { '200': { description: "the seller's credit limit and balances", schema: CreditLimit } },
    errors: { '400': 'invalid_request (creditLimit)', ...OPERATOR_ERRORS },
    handler: async (req, res) => {
      const { sellerId } = req.params;
      const limitMicro = usdcField('creditLimit', req.body.creditLimit)!;
      const now = deps.now();
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
      ctx.logger.warn({ sellerId, creditLimit: formatUsdc(limitMicro) }, 'seller credit limit set');
      const [held, available] = await Promise.all([
        accountBalance(db, 'seller_held', sellerId),
        accountBalance(db, 'seller_available', sellerId),
      ]);
      res.json({
        sellerId,
        creditLimit: formatUsdc(limitMicro),
        held: formatUsdc(held),
        available: formatUsdc(available),
        updatedAt: now.toISOString(),
      });
    },
  });
}

/** The reconciliation report; a chain (or settlement) that cannot be read is a 503, logged. */
async function reconcileWithChain(ctx: LedgerContext, deps: LedgerDeps) {
  try {
    return await reconcileWithSettlement(ctx, deps);
  } catch (error) {
    ctx.logger.error({ err: error }, 'reconciliation could not read the chain');
    throw new HttpError(
      503,
      LedgerReason.ChainUnavailable,
      'the escrow wallet balance could not be read from the chain (or settlement did not list the deposit addresses)',
    );
  }
}
