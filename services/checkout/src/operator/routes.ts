import { assertValid, HttpError, operatorAuth } from '@paygate/http';
import type { ServiceContext } from '@paygate/runtime';
import { Type } from '@sinclair/typebox';
import type { Express } from 'express';
import type { CheckoutConfig } from '../config';
import type { CheckoutDatabase } from '../db';
import { type ClaimRefusal, type TransferMatcher, toTransferView } from '../matching/transfers';
import { toSnapshot } from '../sessions/snapshot';

export const TransferListQuery = Type.Object({
  status: Type.Optional(
    Type.Union(
      ['unmatched', 'attached', 'refund_requested', 'matched', 'reorged', 'claimed'].map((s) =>
        Type.Literal(s),
      ),
    ),
  ),
  limit: Type.Optional(Type.String({ pattern: '^[1-9][0-9]{0,2}$' })),
});
export const TransferIdParam = Type.Object({ id: Type.String({ pattern: '^tr_[0-9a-f]{24}$' }) });
export const AttachBody = Type.Object(
  {
    sessionId: Type.String({ pattern: '^cs_[0-9a-f]{32}$' }),
    note: Type.Optional(Type.String({ maxLength: 500 })),
  },
  { additionalProperties: false },
);
export const RefundBody = Type.Object(
  { note: Type.Optional(Type.String({ maxLength: 500 })) },
  { additionalProperties: false },
);

/** Operator API: transfers that matched nothing, and their resolution (attach to a session, or refund). */
export function operatorRoutes(
  app: Express,
  ctx: ServiceContext<CheckoutDatabase>,
  config: CheckoutConfig,
  matcher: TransferMatcher,
): void {
  const auth = operatorAuth(config.operatorToken);

  app.get('/api/v1/operator/transfers', auth, async (req, res) => {
    const query = assertValid(TransferListQuery, { ...req.query }, 'query');
    const limit = Math.min(Number(query.limit ?? 100), 500);
    const rows = await ctx.db
      .selectFrom('transfers')
      .selectAll()
      .where('status', '=', (query.status ?? 'unmatched') as never)
      .orderBy('observed_at', 'desc')
      .limit(limit)
      .execute();
    res.json({ transfers: rows.map(toTransferView) });
  });

  app.post('/api/v1/operator/transfers/:id/attach', auth, async (req, res) => {
    const { id } = assertValid(TransferIdParam, { id: req.params.id }, 'params');
    const body = assertValid(AttachBody, req.body ?? {}, 'body');
    const result = await ctx.inTransaction((trx) =>
      matcher.attach(trx, id, body.sessionId, body.note ?? null),
    );
    if ('refused' in result) throw refusedError(result);
    res.json({ transfer: toTransferView(result.transfer), session: toSnapshot(result.session, config) });
  });

  app.post('/api/v1/operator/transfers/:id/refund', auth, async (req, res) => {
    const { id } = assertValid(TransferIdParam, { id: req.params.id }, 'params');
    const body = assertValid(RefundBody, req.body ?? {}, 'body');
    const result = await ctx.inTransaction((trx) => matcher.markForRefund(trx, id, body.note ?? null));
    if ('refused' in result) throw refusedError(result);
    res.json({ transfer: toTransferView(result.transfer) });
  });
}

/** The ledger refused the action; what checkout learned (a claimed transfer) is committed before this answer. */
function refusedError({ refused, transfer }: ClaimRefusal): HttpError {
  return new HttpError(refused.status, refused.code, refused.message, {
    ...(refused.claimedBy ? { claimedBy: refused.claimedBy } : {}),
    transfer: toTransferView(transfer),
  });
}
