import { type AnyRoute, defineRoute, notFound, SharedRateLimiter } from '@paygate/http';
import { formatUsdc } from '@paygate/money';

import type { SellerAuth } from '@paygate/seller-auth';
import { sql } from 'kysely';
import type { LedgerContext, LedgerDeps } from '../deps';
import { RefundIdParam, SELLER_ERRORS, usdcField } from '../http/schemas';
import { paymentOutcome } from '../views/call-outcomes';
import { bookRefund, lockSellerTransaction, type RefundRow, refundView } from './book';
import { refundRequestRoutes } from './requests';
import {
  FEE_RULE,
  idempotencyKey,
  REFUND_RATE_LIMIT_ERROR,
  type RefundRouteContext,
  refundRateLimit,
  sellerOf,
  sendSellerWrite,
} from './route-parts';
import { Refund, RefundBody, RefundCreated, TransactionLookup, TransactionLookupQuery } from './schemas';
import { findRequestedTransaction, refundTargetOf } from './targets';

/** The refund routes: a seller's own refunds and the public transaction lookup here, buyers' requests in requests.ts. */
export function refundRoutes(ctx: LedgerContext, deps: LedgerDeps, auth: SellerAuth): AnyRoute[] {
  // freshMs 0: every hit counted in Postgres at once, no timer to flush; the buyers' limiter deletes finished windows.
  const limiter = new SharedRateLimiter(ctx.db, deps.config.refundsPerMinute, deps.now, { freshMs: 0 });
  const seller = { scheme: 'apiKey', middleware: auth.middleware() };
  const parts: RefundRouteContext = { ctx, deps, seller, refundRateLimit: refundRateLimit(limiter) };
  return [
    createRefundRoute(parts),
    getRefundRoute(parts),
    lookupTransactionRoute(parts),
    ...refundRequestRoutes(parts, auth),
  ];
}

function createRefundRoute(parts: RefundRouteContext): AnyRoute {
  const { ctx, deps, seller } = parts;
  const { refundMinAmountMicro, refundMaxPartialPerTransaction, refundsPerMinute } = deps.config;
  return defineRoute({
    method: 'post',
    path: '/api/v1/refunds',
    operationId: 'createRefund',
    summary: 'Refund (part of) a transaction of the calling seller',
    description: `Any transaction of the seller may be refunded, in one or several parts, up to its amount. Instant while the funds are in escrow, otherwise the seller balance is debited. Each refund is an on-chain transfer from escrow, so: a refund is at least ${formatUsdc(refundMinAmountMicro)} USDC (REFUND_MIN_AMOUNT) unless it is all that remains refundable; at most ${refundMaxPartialPerTransaction} partial refunds per transaction (REFUND_MAX_PARTIAL_PER_TRANSACTION), then only all that remains; at most ${refundsPerMinute} refunds a minute per seller (REFUNDS_PER_MINUTE, shared with approvals). ${FEE_RULE}`,
    auth: seller,
    before: [parts.refundRateLimit],
    headers: [idempotencyKey],
    body: RefundBody,
    bodyExamples: {
      partial: { transactionId: 'txn_01KAQ3T0000X7Q0E4W9T6B2M8C', amount: '4', reason: 'customer asked' },
    },
    responses: {
      '201': {
        description: 'the booked refund (status pending until the transfer back is on chain)',
        schema: RefundCreated,
      },
    },
    errors: {
      '400':
        'invalid_request: a field breaks a rule (error.field, error.rule); amount must be > 0, and at least REFUND_MIN_AMOUNT unless it is all that remains (error.minimum, error.refundable)',
      ...SELLER_ERRORS,
      '404': 'not_found: no such transaction for this seller',
      '409':
        'amount_exceeds_refundable (error.refundable says what remains) | too_many_partial_refunds (REFUND_MAX_PARTIAL_PER_TRANSACTION reached: only all that remains, error.refundable) | insufficient_seller_balance (error.available, error.held, error.creditLimit, error.shortfall: the seller no longer has the money with Paygate) | insufficient_platform_revenue | transaction_reversed | idempotency_key_reused',
      '429': REFUND_RATE_LIMIT_ERROR,
    },
    handler: async (req, res) => {
      const body = req.body;
      const amountMicro = usdcField('amount', body.amount)!;
      await sendSellerWrite(
        ctx,
        req,
        res,
        async (trx, sellerId) => {
          const txn = await lockSellerTransaction(trx, body.transactionId, sellerId);
          const refund = await bookRefund(trx, deps, txn, { amountMicro, reason: body.reason });
          // bookRefund kept txn's refunded total current: what remains after this refund.
          const remainingRefundable = formatUsdc(txn.amount_micro - txn.refunded_micro);
          return { status: 201, body: { ...refundView(refund), remainingRefundable } };
        },
        { retryConflicts: true },
      );
    },
  });
}

function getRefundRoute({ ctx, seller }: RefundRouteContext): AnyRoute {
  return defineRoute({
    method: 'get',
    path: '/api/v1/refunds/:id',
    operationId: 'getRefund',
    summary: 'One refund of the calling seller',
    auth: seller,
    params: RefundIdParam,
    responses: {
      '200': { description: 'the refund; completed with refundTxHash once sent on chain', schema: Refund },
    },
    errors: { ...SELLER_ERRORS, '404': 'not_found' },
    handler: async (req, res) => {
      const result =
        await sql<RefundRow>`select * from refunds where id = ${req.params.id} and seller_id = ${sellerOf(req)}`.execute(
          ctx.db,
        );
      if (!result.rows[0]) throw notFound('refund');
      res.json(refundView(result.rows[0]));
    },
  });
}

// Public (the widget's PaymentResult.transactionId); mounted before /api/v1/transactions/:id.
function lookupTransactionRoute({ ctx, deps }: RefundRouteContext): AnyRoute {
  return defineRoute({
    method: 'get',
    path: '/api/v1/transactions/lookup',
    operationId: 'lookupTransaction',
    summary: 'Public: the ledger transaction a checkout session or an on-chain transfer became',
    description:
      "What a buyer or the checkout widget knows (sessionId, or txHash and logIndex) to the ledger transactionId, what is still refundable and what became of the paid call (outcome): an agent polls it by the payment's txHash to see a call its seller did not serve come back (refund_pending, then refunded with refundTxHash). A payment is booked a moment after it is confirmed: 404 transaction_not_found until then.",
    query: TransactionLookupQuery,
    responses: { '200': { description: 'the transaction', schema: TransactionLookup } },
    errors: {
      '400': 'invalid_request: neither or both of sessionId and txHash, or logIndex needed',
      '404': 'transaction_not_found',
    },
    handler: async (req, res) => {
      const query = req.query;
      const target = refundTargetOf({
        sessionId: query.sessionId,
        txHash: query.txHash,
        logIndex: query.logIndex === undefined ? undefined : Number(query.logIndex),
      });
      // One snapshot: a refund committed between two reads would show refund_pending beside its amount as refundable.
      const { txn, outcome } = await ctx.db
        .transaction()
        .setIsolationLevel('repeatable read')
        .setAccessMode('read only')
        .execute(async (trx) => {
          const txn = await findRequestedTransaction(trx, deps, target);
          return { txn, outcome: await paymentOutcome(trx, txn.payment_id, deps.now()) };
        });
      res.json({
        transactionId: txn.id,
        sessionId: txn.session_id,
        txHash: txn.tx_hash,
        logIndex: txn.log_index,
        amount: formatUsdc(txn.amount_micro),
        refundableAmount: formatUsdc(
          txn.escrow_status === 'reversed' ? 0n : txn.amount_micro - txn.refunded_micro,
        ),
        ...outcome,
      });
    },
  });
}
