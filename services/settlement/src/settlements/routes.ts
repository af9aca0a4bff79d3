import { type AnyRoute, defineRoute, notFound, securitySchemes } from '@paygate/http';
import { formatUsdc } from '@paygate/money';
import type { ServiceContext } from '@paygate/runtime';
import type { SellerAuth } from '@paygate/seller-auth';
import { Type } from '@sinclair/typebox';
import type { Selectable } from 'kysely';
import type { SettlementDB, SettlementsTable } from '../db';
import { Settlement, SettlementIdParam, SettlementListQuery, SettlementPage } from './schemas';

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

/** Seller-facing, read-only: a seller sees only its own settlements (Authorization: Bearer sk_…). */
export function settlementRoutes(ctx: ServiceContext<SettlementDB>, auth: SellerAuth): AnyRoute[] {
  const seller = { scheme: 'apiKey', middleware: auth.middleware() };
  const sellerErrors = { '401': 'missing or unknown API key' };
  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/settlements',
      summary: "The calling seller's settlements, newest period first",
      auth: seller,
      query: SettlementListQuery,
      responses: { '200': SettlementPage },
      errors: { '400': 'bad query (field and rule named)', ...sellerErrors },
      handler: async (req, res) => {
        const limit = Number(req.query.limit ?? '20');
        const { status, starting_after: startingAfter } = req.query;
        let query = ctx.db
          .selectFrom('settlements')
          .selectAll()
          .where('seller_id', '=', req.seller!.sellerId)
          .orderBy('settlement_id', 'desc')
          .limit(limit + 1);
        if (status) query = query.where('status', '=', status);
        if (startingAfter) query = query.where('settlement_id', '<', startingAfter);
        const rows = await query.execute();
        const page = rows.slice(0, limit);
        res.json({
          data: page.map(settlementView),
          hasMore: rows.length > limit,
          nextCursor: rows.length > limit ? page[page.length - 1]!.settlement_id : null,
        });
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/settlements/:settlementId',
      summary: 'One settlement of the calling seller',
      auth: seller,
      params: SettlementIdParam,
      responses: { '200': Type.Object(Settlement.properties, { description: 'the settlement' }) },
      errors: {
        '400': 'malformed settlementId',
        ...sellerErrors,
        '404': 'no such settlement for this seller',
      },
      handler: async (req, res) => {
        const row = await ctx.db
          .selectFrom('settlements')
          .selectAll()
          .where('settlement_id', '=', req.params.settlementId)
          .where('seller_id', '=', req.seller!.sellerId)
          .executeTakeFirst();
        if (!row) throw notFound('settlement');
        res.json(settlementView(row));
      },
    }),
  ];
}

export const SETTLEMENT_OPENAPI_PATH = '/api/v1/openapi/settlement.json';

/** The OpenAPI 3.1 document's own facts; its paths are the declared routes (and the document route). */
export const settlementDocument = {
  title: 'Paygate settlements',
  description:
    "The seller's settlements: one per seller and period (DAILY, WEEKLY or MONTHLY), paid out in USDC from the escrow wallet once the available balance reaches the seller's minimum. Amounts are decimal USDC strings.",
  securitySchemes: { apiKey: securitySchemes.apiKey, operatorToken: securitySchemes.operatorToken },
  schemas: { Settlement },
};
