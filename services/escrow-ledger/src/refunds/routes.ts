import { refundRequestMessage } from '@paygate/agent-client';
import { enqueueEvent } from '@paygate/bus';
import { createEvent } from '@paygate/contracts';
import { badRequest, HttpError, notFound } from '@paygate/http';
import { formatUsdc, MoneyFormatError, parseUsdc } from '@paygate/money';
import type { ServiceContext } from '@paygate/runtime';
import type { SellerAuth } from '@paygate/seller-auth';
import { verifyMessage } from 'ethers';
import type { Express, Request } from 'express';
import { sql } from 'kysely';
import type { LedgerDeps } from '../deps';
import { parseInput } from '../http/schemas';
import { withIdempotency } from '../idempotency';
import { newRefundRequestId } from '../ids';
import { bookRefund, lockSellerTransaction, type RefundRow, refundView } from './book';
import {
  ApproveBody,
  RefundBody,
  RefundRequestBody,
  RefundRequestListQuery,
  RejectBody,
  TransactionLookupQuery,
} from './schemas';
import { findRequestedTransaction, findTransactionForUpdate, refundTargetOf } from './targets';

/** The exact text a payer signs (EIP-191 personal_sign) to ask for a refund; defined in @paygate/agent-client. */
export { refundRequestMessage };

function parseAmount(value: string | undefined): bigint | undefined {
  if (value === undefined) return undefined;
  try {
    return parseUsdc(value);
  } catch (error) {
    if (error instanceof MoneyFormatError) throw badRequest('amount', error.rule);
    throw error;
  }
}

interface RefundRequestRow {
  id: string;
  transaction_id: string;
  seller_id: string;
  payer: string;
  reason: string;
  status: 'pending' | 'approved' | 'rejected' | 'completed';
  refund_id: string | null;
  decision_reason: string | null;
  created_at: Date;
  decided_at: Date | null;
  completed_at: Date | null;
  /** From the booked refund (joined), when there is one. */
  refund_status?: 'pending' | 'completed' | 'failed' | null;
  refund_amount_micro?: bigint | null;
  refund_tx_hash?: string | null;
}

/** Refund requests with their booked refund's state (left join), for every read of a request. */
const requestsWithRefund = sql`(select rr.*, r.status as refund_status, r.amount_micro as refund_amount_micro,
    r.refund_tx_hash from refund_requests rr left join refunds r on r.id = rr.refund_id)`;

function requestView(row: RefundRequestRow) {
  return {
    id: row.id,
    refundRequestId: row.id,
    transactionId: row.transaction_id,
    reason: row.reason,
    status: row.status,
    refundId: row.refund_id,
    decisionReason: row.decision_reason,
    refund:
      row.refund_status && row.refund_amount_micro != null
        ? {
            status: row.refund_status,
            amount: formatUsdc(row.refund_amount_micro),
            refundTxHash: row.refund_tx_hash ?? null,
          }
        : null,
    createdAt: new Date(row.created_at).toISOString(),
    decidedAt: row.decided_at ? new Date(row.decided_at).toISOString() : null,
    completedAt: row.completed_at ? new Date(row.completed_at).toISOString() : null,
  };
}

const sellerOf = (req: Request) => req.seller!.sellerId;

export function mountRefundRoutes(
  app: Express,
  ctx: ServiceContext,
  deps: LedgerDeps,
  auth: SellerAuth,
): void {
  // Seller refund: instant from the hold while in escrow, else debited from the seller's balance.
  app.post('/api/v1/refunds', auth.middleware(), async (req, res) => {
    const body = parseInput(RefundBody, req.body ?? {}, 'body');
    const amountMicro = parseAmount(body.amount)!;
    const sellerId = sellerOf(req);
    const response = await ctx.inTransaction((trx) =>
      withIdempotency(trx, req, sellerId, async () => {
        const txn = await lockSellerTransaction(trx, body.transactionId, sellerId);
        const refund = await bookRefund(trx, deps, txn, { amountMicro, reason: body.reason });
        return { status: 201, body: { ...refundView(refund), remainingRefundable: remaining(txn) } };
      }),
    );
    res.status(response.status).json(response.body);
  });

  app.get('/api/v1/refunds/:id', auth.middleware(), async (req, res) => {
    const result =
      await sql<RefundRow>`select * from refunds where id = ${String(req.params.id)} and seller_id = ${sellerOf(req)}`.execute(
        ctx.db,
      );
    if (!result.rows[0]) throw notFound('refund');
    res.json(refundView(result.rows[0]));
  });

  // Public: which ledger transaction a checkout session or an on-chain transfer became (the widget's
  // PaymentResult.transactionId). Mounted before /api/v1/transactions/:id.
  app.get('/api/v1/transactions/lookup', async (req, res) => {
    const query = parseInput(TransactionLookupQuery, { ...req.query }, 'query');
    const txn = await findRequestedTransaction(
      ctx.db,
      deps,
      refundTargetOf({
        sessionId: query.sessionId,
        txHash: query.txHash,
        logIndex: query.logIndex === undefined ? undefined : Number(query.logIndex),
      }),
    );
    res.json({
      transactionId: txn.id,
      sessionId: txn.session_id,
      txHash: txn.tx_hash,
      logIndex: txn.log_index,
      amount: formatUsdc(txn.amount_micro),
      refundableAmount: formatUsdc(
        txn.escrow_status === 'reversed' ? 0n : txn.amount_micro - txn.refunded_micro,
      ),
    });
  });

  // Buyer refund request: only the payer, proven by a wallet signature over the request. The payment is named by
  // its transactionId, its transfer (txHash [+ logIndex]) or its checkout session (sessionId).
  app.post('/api/v1/refund-requests', async (req, res) => {
    const body = parseInput(RefundRequestBody, req.body ?? {}, 'body');
    const target = refundTargetOf(body);
    let signer: string;
    try {
      signer = verifyMessage(refundRequestMessage(target, body.reason), body.signature);
    } catch {
      throw badRequest('signature', 'must be an EIP-191 signature of the refund request message');
    }
    const view = await ctx.inTransaction(async (trx) => {
      const txn = await findTransactionForUpdate(trx, deps, target);
      if (signer.toLowerCase() !== txn.payer.toLowerCase()) {
        throw new HttpError(
          403,
          'not_payer',
          'only the wallet that paid this transaction can ask for its refund',
          {
            field: 'signature',
            rule: 'must be signed by the payer wallet',
          },
        );
      }
      if (txn.escrow_status === 'reversed' || txn.refunded_micro >= txn.amount_micro) {
        throw new HttpError(409, 'nothing_refundable', 'this transaction has nothing left to refund');
      }
      const pending =
        await sql`select 1 from refund_requests where transaction_id = ${txn.id} and status = 'pending'`.execute(
          trx,
        );
      if (pending.rows.length > 0) {
        throw new HttpError(
          409,
          'refund_request_pending',
          'a refund request for this transaction is already pending',
        );
      }
      const now = deps.now();
      const row =
        await sql<RefundRequestRow>`insert into refund_requests (id, transaction_id, seller_id, payer, reason,
            signature, status, created_at)
          values (${newRefundRequestId()}, ${txn.id}, ${txn.seller_id}, ${txn.payer}, ${body.reason}, ${body.signature.toLowerCase()},
            'pending', ${now}) returning *`.execute(trx);
      const request = row.rows[0]!;
      await enqueueEvent(
        trx,
        createEvent('refund.requested', 'escrow-ledger', {
          event: 'refund.requested',
          refundRequestId: request.id,
          transactionId: txn.id,
          sellerId: txn.seller_id,
          reason: body.reason,
          requestedAt: now.toISOString(),
        }),
      );
      return requestView(request);
    });
    res.status(201).json(view);
  });

  app.get('/api/v1/refund-requests', auth.middleware(), async (req, res) => {
    const { status } = parseInput(RefundRequestListQuery, { ...req.query }, 'query');
    const rows =
      await sql<RefundRequestRow>`select * from ${requestsWithRefund} rq where seller_id = ${sellerOf(req)}
        and (${status ?? null}::text is null or status = ${status ?? null}) order by created_at desc limit 100`.execute(
        ctx.db,
      );
    res.json({ data: rows.rows.map(requestView) });
  });

  // The buyer's status route: public (the rrq_ id is unguessable); with a seller key, only that seller's.
  const sellerIfKeyed = auth.middleware();
  app.get(
    '/api/v1/refund-requests/:id',
    (req, res, next) => (req.headers.authorization ? sellerIfKeyed(req, res, next) : next()),
    async (req, res) => {
      const sellerId = req.seller?.sellerId ?? null;
      const rows = await sql<RefundRequestRow>`select * from ${requestsWithRefund} rq
          where id = ${String(req.params.id)} and (${sellerId}::text is null or seller_id = ${sellerId})`.execute(
        ctx.db,
      );
      if (!rows.rows[0]) throw notFound('refund request');
      res.json(requestView(rows.rows[0]));
    },
  );

  // Merchant approval makes the refund (the whole remaining amount unless `amount` says less).
  app.post('/api/v1/refund-requests/:id/approve', auth.middleware(), async (req, res) => {
    const body = parseInput(ApproveBody, req.body ?? {}, 'body');
    const amountMicro = parseAmount(body.amount);
    const sellerId = sellerOf(req);
    const response = await ctx.inTransaction((trx) =>
      withIdempotency(trx, req, sellerId, async () => {
        const request = await lockPendingRequest(trx, String(req.params.id), sellerId);
        const txn = await lockSellerTransaction(trx, request.transaction_id, sellerId);
        const refund = await bookRefund(trx, deps, txn, {
          amountMicro: amountMicro ?? txn.amount_micro - txn.refunded_micro,
          reason: request.reason,
          refundRequestId: request.id,
        });
        const now = deps.now();
        const updated =
          await sql<RefundRequestRow>`update refund_requests set status = 'approved', refund_id = ${refund.id},
              decided_at = ${now} where id = ${request.id} returning *`.execute(trx);
        await enqueueEvent(
          trx,
          createEvent('refund.approved', 'escrow-ledger', {
            refundRequestId: request.id,
            refundId: refund.id,
            transactionId: txn.id,
            sellerId,
            amount: refundView(refund).amount,
            approvedAt: now.toISOString(),
          }),
        );
        return { status: 200, body: { ...requestView(updated.rows[0]!), refund: refundView(refund) } };
      }),
    );
    res.status(response.status).json(response.body);
  });

  app.post('/api/v1/refund-requests/:id/reject', auth.middleware(), async (req, res) => {
    const body = parseInput(RejectBody, req.body ?? {}, 'body');
    const sellerId = sellerOf(req);
    const response = await ctx.inTransaction((trx) =>
      withIdempotency(trx, req, sellerId, async () => {
        const request = await lockPendingRequest(trx, String(req.params.id), sellerId);
        const updated = await sql<RefundRequestRow>`update refund_requests set status = 'rejected',
              decision_reason = ${body.reason ?? null}, decided_at = ${deps.now()} where id = ${request.id} returning *`.execute(
          trx,
        );
        return { status: 200, body: requestView(updated.rows[0]!) };
      }),
    );
    res.status(response.status).json(response.body);
  });
}

async function lockPendingRequest(
  trx: Parameters<typeof lockSellerTransaction>[0],
  id: string,
  sellerId: string,
) {
  const rows =
    await sql<RefundRequestRow>`select * from refund_requests where id = ${id} and seller_id = ${sellerId} for update`.execute(
      trx,
    );
  const request = rows.rows[0];
  if (!request) throw notFound('refund request');
  if (request.status !== 'pending') {
    throw new HttpError(
      409,
      'refund_request_not_pending',
      `this refund request is already ${request.status}`,
    );
  }
  return request;
}

function remaining(txn: { amount_micro: bigint; refunded_micro: bigint }): string {
  return formatUsdc(txn.amount_micro - txn.refunded_micro);
}
