import { HttpError, notFound, operatorAuth } from '@paygate/http';
import { formatUsdc } from '@paygate/money';
import type { ServiceContext } from '@paygate/runtime';
import type { Express } from 'express';
import { sql } from 'kysely';
import type { LedgerDeps } from '../deps';
import { parseInput } from '../http/schemas';
import { reconcile, recordReconciliation } from '../reconciliation/reconcile';
import { ConflictIdParam, ConflictListQuery, UnmatchedRefundListQuery } from './schemas';

export function mountOperatorRoutes(app: Express, ctx: ServiceContext, deps: LedgerDeps): void {
  const operator = operatorAuth(deps.config.operatorToken);

  app.get('/api/v1/operator/ledger/conflicts', operator, async (req, res) => {
    const status = parseInput(ConflictListQuery, { ...req.query }, 'query').status ?? 'open';
    const rows = await sql<Record<string, any>>`select * from payment_conflicts
        where ${status} = 'all' or status = ${status} order by id desc limit 200`.execute(ctx.db);
    res.json({
      data: rows.rows.map((r) => ({
        conflictId: String(r.id),
        kind: r.kind,
        status: r.status,
        chainId: r.chain_id,
        txHash: r.tx_hash,
        logIndex: r.log_index,
        paymentId: r.payment_id,
        source: r.source,
        sellerId: r.seller_id,
        amount: r.amount_micro === null ? null : formatUsdc(r.amount_micro),
        existingTransactionId: r.existing_transaction_id,
        detail: r.detail,
        createdAt: new Date(r.created_at).toISOString(),
      })),
    });
  });

  app.post('/api/v1/operator/ledger/conflicts/:id/resolve', operator, async (req, res) => {
    const { id } = parseInput(ConflictIdParam, { ...req.params }, 'params');
    const rows = await sql`update payment_conflicts set status = 'resolved' where id = ${id}::bigint
        returning id`.execute(ctx.db);
    if (rows.rows.length === 0) throw notFound('conflict');
    res.json({ conflictId: id, status: 'resolved' });
  });

  // Money that reached the escrow wallet and that no payment has claimed.
  app.get('/api/v1/operator/ledger/suspense', operator, async (_req, res) => {
    const rows = await sql<Record<string, any>>`select * from transfers
        where claimed_by_transaction_id is null and refund_id is null and status = 'observed' order by observed_at desc limit 500`.execute(
      ctx.db,
    );
    const total = await sql<{
      balance_micro: bigint;
    }>`select balance_micro from accounts where kind = 'suspense'`.execute(ctx.db);
    res.json({
      balance: formatUsdc(total.rows[0]?.balance_micro ?? 0n),
      data: rows.rows.map((r) => ({
        chainId: r.chain_id,
        txHash: r.tx_hash,
        logIndex: r.log_index,
        from: r.from_address,
        amount: formatUsdc(r.amount_micro),
        observedAt: new Date(r.observed_at).toISOString(),
      })),
    });
  });

  // Refunds of transfers no payment claimed (an operator's decision in checkout), and whether they were sent.
  app.get('/api/v1/operator/ledger/unmatched-refunds', operator, async (req, res) => {
    const status = parseInput(UnmatchedRefundListQuery, { ...req.query }, 'query').status ?? 'all';
    const rows = await sql<Record<string, any>>`select * from refunds
        where kind = 'unmatched_transfer' and (${status} = 'all' or status = ${status})
        order by created_at desc, id desc limit 200`.execute(ctx.db);
    res.json({
      data: rows.rows.map((r) => ({
        refundId: r.id,
        kind: r.kind,
        status: r.status,
        chainId: r.chain_id,
        txHash: r.tx_hash,
        logIndex: r.log_index,
        payer: r.payer,
        amount: formatUsdc(r.amount_micro),
        reason: r.reason,
        refundRequestId: r.transfer_refund_request_id,
        refundTxHash: r.refund_tx_hash,
        createdAt: new Date(r.created_at).toISOString(),
        completedAt: r.completed_at ? new Date(r.completed_at).toISOString() : null,
      })),
    });
  });

  app.get('/api/v1/operator/ledger/accounts', operator, async (_req, res) => {
    const rows = await sql<
      Record<string, any>
    >`select kind, owner, normal_side, floor_micro, balance_micro from accounts
        order by kind, owner limit 1000`.execute(ctx.db);
    res.json({
      data: rows.rows.map((r) => ({
        kind: r.kind,
        owner: r.owner || null,
        normalSide: r.normal_side,
        floor: r.floor_micro === null ? null : formatUsdc(r.floor_micro),
        balance: formatUsdc(r.balance_micro),
      })),
    });
  });

  app.get('/api/v1/reconciliation', operator, async (_req, res) => {
    let report: Awaited<ReturnType<typeof reconcile>>;
    try {
      report = await reconcile(ctx.db, deps.config);
    } catch (error) {
      ctx.logger.error({ err: error }, 'reconciliation could not read the chain');
      throw new HttpError(
        503,
        'chain_unavailable',
        'the escrow wallet balance could not be read from the chain',
      );
    }
    recordReconciliation(deps, ctx, report);
    res.json(report);
  });
}
