import { badRequest, notFound, serveOpenApi } from '@paygate/http';
import { formatUsdc } from '@paygate/money';
import type { ServiceContext } from '@paygate/runtime';
import type { SellerAuth } from '@paygate/seller-auth';
import type { Express, Request } from 'express';
import type { Selectable } from 'kysely';
import type { SettlementDB, SettlementStatus, SettlementsTable } from '../db';
import { settlementOpenApi } from './openapi';

const STATUSES: readonly SettlementStatus[] = ['pending', 'skipped', 'sending', 'completed', 'failed'];
const SETTLEMENT_ID = /^stl_[0-9A-HJKMNP-TV-Z]{26}$/;

export function settlementView(row: Selectable<SettlementsTable>) {
  return {
    settlementId: row.settlement_id,
    sellerId: row.seller_id,
    status: row.status,
    amount: row.amount_micro === null ? null : formatUsdc(row.amount_micro),
    minimumAmount: formatUsdc(row.minimum_micro),
    availableAmount: row.available_micro === null ? null : formatUsdc(row.available_micro),
    payoutAddress: row.payout_address,
    txHash: row.tx_hash,
    period: {
      frequency: row.frequency,
      key: row.period_key,
      start: row.period_start.toISOString(),
      end: row.period_end.toISOString(),
    },
    skipReason: row.skip_reason,
    failureReason: row.failure_reason,
    createdAt: row.created_at.toISOString(),
    completedAt: row.completed_at?.toISOString() ?? null,
  };
}

function queryString(req: Request, name: string): string | undefined {
  const value = req.query[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw badRequest(name, 'must be given once, as a string');
  return value;
}

/** Seller-facing, read-only: a seller sees only its own settlements (Authorization: Bearer sk_…). */
export function settlementRoutes(app: Express, ctx: ServiceContext<SettlementDB>, auth: SellerAuth): void {
  serveOpenApi(app, '/api/v1/openapi/settlement.json', settlementOpenApi);

  app.get('/api/v1/settlements', auth.middleware(), async (req, res) => {
    const limitText = queryString(req, 'limit') ?? '20';
    if (!/^[0-9]{1,3}$/.test(limitText) || Number(limitText) < 1 || Number(limitText) > 100) {
      throw badRequest('limit', 'must be an integer between 1 and 100');
    }
    const limit = Number(limitText);
    const status = queryString(req, 'status');
    if (status !== undefined && !(STATUSES as readonly string[]).includes(status)) {
      throw badRequest('status', `must be one of ${STATUSES.join(', ')}`);
    }
    const startingAfter = queryString(req, 'starting_after');
    if (startingAfter !== undefined && !SETTLEMENT_ID.test(startingAfter)) {
      throw badRequest('starting_after', 'must be a settlementId (stl_…)');
    }
    let query = ctx.db
      .selectFrom('settlements')
      .selectAll()
      .where('seller_id', '=', req.seller!.sellerId)
      .orderBy('settlement_id', 'desc')
      .limit(limit + 1);
    if (status) query = query.where('status', '=', status as SettlementStatus);
    if (startingAfter) query = query.where('settlement_id', '<', startingAfter);
    const rows = await query.execute();
    const page = rows.slice(0, limit);
    res.json({
      data: page.map(settlementView),
      hasMore: rows.length > limit,
      nextCursor: rows.length > limit ? page[page.length - 1]!.settlement_id : null,
    });
  });

  app.get('/api/v1/settlements/:settlementId', auth.middleware(), async (req, res) => {
    const settlementId = String(req.params.settlementId);
    if (!SETTLEMENT_ID.test(settlementId)) throw badRequest('settlementId', 'must be a settlementId (stl_…)');
    const row = await ctx.db
      .selectFrom('settlements')
      .selectAll()
      .where('settlement_id', '=', settlementId)
      .where('seller_id', '=', req.seller!.sellerId)
      .executeTakeFirst();
    if (!row) throw notFound('settlement');
    res.json(settlementView(row));
  });
}
