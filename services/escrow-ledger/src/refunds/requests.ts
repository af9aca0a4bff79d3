import { enqueueEvent } from '@paygate/bus';
import { createEvent } from '@paygate/contracts';
import { type AnyRoute, badRequest, defineRoute, HttpError, notFound } from '@paygate/http';
import { formatUsdc } from '@paygate/money';
import { REFUND_REQUEST_MAX_VALIDITY_MS, type RefundTarget, refundRequestMessage } from '@paygate/protocol';
import type { SellerAuth } from '@paygate/seller-auth';
import { verifyMessage } from 'ethers';
import type { RequestHandler } from 'express';
import { sql } from 'kysely';
import type { LedgerDatabase, LedgerTrx } from '../db';
import type { LedgerDeps } from '../deps';
import { RefundRequestIdParam, SELLER_ERRORS, usdcField } from '../http/schemas';
import { newRefundRequestId } from '../ids';
import { LedgerReason } from '../reasons';
import { bookRefund, lockSellerTransaction, refundView } from './book';
import {
  FEE_RULE,
  idempotencyKey,
  REFUND_RATE_LIMIT_ERROR,
  type RefundRouteContext,
  sellerOf,
  sendSellerWrite,
} from './route-parts';
import {
  ApproveBody,
  RefundRequest,
  RefundRequestApproved,
  RefundRequestBody,
  RefundRequestList,
  RefundRequestListQuery,
  RejectBody,
} from './schemas';
import { findTransactionForUpdate, refundTargetOf } from './targets';

const SIGNING_FIELDS = { chainId: '<chainId>', nonce: '<nonce>', expiresAt: '<expiresAt>' };
const SIGNED_MESSAGE = refundRequestMessage({ transactionId: '<transactionId>' }, '<reason>', SIGNING_FIELDS);
const SIGNED_MESSAGE_TX = refundRequestMessage(
  { txHash: '<txHash>', logIndex: 0 },
  '<reason>',
  SIGNING_FIELDS,
).replace('log index: 0\n', 'log index: <logIndex>\n');
const SIGNED_MESSAGE_SESSION = refundRequestMessage({ sessionId: '<sessionId>' }, '<reason>', SIGNING_FIELDS);

/** Buyers' refund requests: filed by the payer, followed by the buyer, decided by the merchant. */
export function refundRequestRoutes(parts: RefundRouteContext, auth: SellerAuth): AnyRoute[] {
  const kit = { ...parts, sellerIfKeyed: auth.middleware() };
  return [
    createRefundRequestRoute,
    listRefundRequestsRoute,
    getRefundRequestRoute,
    approveRefundRequestRoute,
    rejectRefundRequestRoute,
  ].map((route) => route(kit));
}

type RefundRequestRouteKit = RefundRouteContext & { sellerIfKeyed: RequestHandler };

// Only the payer files one, proven by a wallet signature over the request.
function createRefundRequestRoute({ ctx, deps }: RefundRequestRouteKit): AnyRoute {
  return defineRoute({
    method: 'post',
    path: '/api/v1/refund-requests',
    operationId: 'createRefundRequest',
    summary: 'Buyer: ask the merchant for a refund (signed by the payer wallet, no API key)',
    description: `Name the payment by exactly one of transactionId, txHash (the on-chain transfer; logIndex too when one transaction made several payments into escrow) or sessionId (the checkout session it paid). The payer proves it is the payer with an EIP-191 personal_sign signature over exactly this message (lines separated by \\n, no trailing newline):\n\n\`\`\`\n${SIGNED_MESSAGE}\n\`\`\`\n\nor, naming the transfer (without the log index line when logIndex is not given; txHash lowercase):\n\n\`\`\`\n${SIGNED_MESSAGE_TX}\n\`\`\`\n\nor, naming the checkout session:\n\n\`\`\`\n${SIGNED_MESSAGE_SESSION}\n\`\`\`\n\nchainId, nonce and expiresAt are sent in the body too: chainId must be this ledger's chain, expiresAt in the future and at most 24 hours ahead, and a signed request that was already decided is refused (409 refund_request_replayed), so a captured request cannot be filed again. @paygate/agent-client builds and signs it (agent.requestRefund). The answer carries the request id, its status and the transactionId; GET /api/v1/refund-requests/{id} follows it without a key. The request is pending until the merchant approves (a refund is booked) or rejects it; one pending request per transaction: the same signed request sent again answers 200 with the request it made (Idempotent-Replayed: true), another one 409. Raises refund.requested.`,
    body: RefundRequestBody,
    bodyExamples: {
      request: {
        transactionId: 'txn_01KAQ3T0000X7Q0E4W9T6B2M8C',
        reason: 'never arrived',
        signature: `0x${'ab'.repeat(65)}`,
      },
    },
    responses: {
      '201': { description: 'the pending request', schema: RefundRequest },
      '200': {
        description:
          'the same signed request sent again while it is pending (a retry): the request it made, with Idempotent-Replayed: true; nothing is raised twice',
        schema: RefundRequest,
      },
    },
    errors: {
      '400': 'invalid_request: a field breaks a rule, or the signature is not an EIP-191 signature',
      '403': 'not_payer: signed by another wallet than the payer (field signature)',
      '404':
        'transaction_not_found: no payment on the books for this transactionId, txHash or sessionId (yet)',
      '409':
        'nothing_refundable | refund_request_pending: another request (another reason) is pending; error.refundRequestId names it',
    },
    handler: async (req, res) => {
      const body = req.body;
      const target = refundTargetOf(body);
      const signing = checkRefundRequestSigning(body, deps.config.chainId, deps.now());
      let signer: string;
      try {
        signer = verifyMessage(refundRequestMessage(target, body.reason, signing), body.signature);
      } catch {
        throw badRequest('signature', 'must be an EIP-191 signature of the refund request message');
      }
      const outcome = await ctx.inTransaction((trx) => fileRefundRequest(trx, deps, target, body, signer));
      if (outcome.replayed) res.setHeader('Idempotent-Replayed', 'true');
      res.status(outcome.replayed ? 200 : 201).json(outcome.view);
    },
  });
}

function listRefundRequestsRoute({ ctx, seller }: RefundRequestRouteKit): AnyRoute {
  return defineRoute({
    method: 'get',
    path: '/api/v1/refund-requests',
    operationId: 'listRefundRequests',
    summary: "The calling seller's refund requests, newest first",
    auth: seller,
    query: RefundRequestListQuery,
    responses: { '200': { description: 'at most 100 requests', schema: RefundRequestList } },
    errors: { '400': 'invalid_request (bad status)', ...SELLER_ERRORS },
    handler: async (req, res) => {
      const { status } = req.query;
      const rows =
        await sql<RefundRequestRow>`select * from ${requestsWithRefund} rq where seller_id = ${sellerOf(req)}
        and (${status ?? null}::text is null or status = ${status ?? null}) order by created_at desc limit 100`.execute(
          ctx.db,
        );
      res.json({ data: rows.rows.map(requestView) });
    },
  });
}

// Public for the buyer (the rrq_ id is unguessable); with a seller key, only that seller's.
function getRefundRequestRoute({ ctx, sellerIfKeyed }: RefundRequestRouteKit): AnyRoute {
  return defineRoute({
    method: 'get',
    path: '/api/v1/refund-requests/:id',
    operationId: 'getRefundRequest',
    summary: "A refund request's status: public for the buyer (no key), or the calling seller's own",
    description:
      "Without Authorization anyone holding the request id (rrq_…, unguessable) reads its status, its refund and the refund transfer (refund.refundTxHash once completed). With a seller key only that seller's requests are found.",
    auth: {
      scheme: 'apiKey',
      optional: true,
      middleware: (req, res, next) => (req.headers.authorization ? sellerIfKeyed(req, res, next) : next()),
    },
    params: RefundRequestIdParam,
    responses: { '200': { description: 'the request', schema: RefundRequest } },
    errors: { ...SELLER_ERRORS, '404': 'not_found' },
    handler: async (req, res) => {
      const sellerId = req.seller?.sellerId ?? null;
      const rows = await sql<RefundRequestRow>`select * from ${requestsWithRefund} rq
          where id = ${req.params.id} and (${sellerId}::text is null or seller_id = ${sellerId})`.execute(
        ctx.db,
      );
      if (!rows.rows[0]) throw notFound('refund request');
      res.json(requestView(rows.rows[0]));
    },
  });
}

function approveRefundRequestRoute({ ctx, deps, seller, refundRateLimit }: RefundRequestRouteKit): AnyRoute {
  return defineRoute({
    method: 'post',
    path: '/api/v1/refund-requests/:id/approve',
    operationId: 'approveRefundRequest',
    summary:
      'Merchant: approve a pending request; books the refund (all that remains unless amount says less)',
    description: `The refund follows the rules of POST /api/v1/refunds: at least REFUND_MIN_AMOUNT unless all that remains (the default), at most REFUND_MAX_PARTIAL_PER_TRANSACTION partial refunds per transaction, and counted in the seller's REFUNDS_PER_MINUTE. ${FEE_RULE}`,
    auth: seller,
    before: [refundRateLimit],
    params: RefundRequestIdParam,
    headers: [idempotencyKey],
    body: ApproveBody,
    bodyOptional: true,
    bodyExamples: { all: {}, part: { amount: '2' } },
    responses: {
      '200': {
        description: 'the request, now approved, with the booked refund',
        schema: RefundRequestApproved,
      },
    },
    errors: {
      '400': 'invalid_request (amount below REFUND_MIN_AMOUNT and not all that remains: error.minimum)',
      ...SELLER_ERRORS,
      '404': 'not_found: no such request for this seller',
      '409':
        'refund_request_not_pending | nothing_refundable (no amount given and nothing remains) | amount_exceeds_refundable | too_many_partial_refunds | insufficient_seller_balance | insufficient_platform_revenue | transaction_reversed | idempotency_key_reused',
      '429': REFUND_RATE_LIMIT_ERROR,
    },
    handler: async (req, res) => {
      const body = req.body ?? {};
      const amountMicro = usdcField('amount', body.amount);
      await sendSellerWrite(
        ctx,
        req,
        res,
        (trx, sellerId) => approveRefundRequest(trx, deps, req.params.id, sellerId, amountMicro),
        { retryConflicts: true },
      );
    },
  });
}

function rejectRefundRequestRoute({ ctx, deps, seller }: RefundRequestRouteKit): AnyRoute {
  return defineRoute({
    method: 'post',
    path: '/api/v1/refund-requests/:id/reject',
    operationId: 'rejectRefundRequest',
    summary: 'Merchant: reject a pending request',
    auth: seller,
    params: RefundRequestIdParam,
    headers: [idempotencyKey],
    body: RejectBody,
    bodyOptional: true,
    bodyExamples: { reason: { reason: 'delivered' } },
    responses: { '200': { description: 'the request, now rejected', schema: RefundRequest } },
    errors: {
      '400': 'invalid_request',
      ...SELLER_ERRORS,
      '404': 'not_found',
      '409': 'refund_request_not_pending | idempotency_key_reused',
    },
    handler: async (req, res) => {
      const body = req.body ?? {};
      await sendSellerWrite(ctx, req, res, async (trx, sellerId) => {
        const request = await lockPendingRequest(trx, req.params.id, sellerId);
        const updated = await sql<RefundRequestRow>`update refund_requests set status = 'rejected',
            decision_reason = ${body.reason ?? null}, decided_at = ${deps.now()} where id = ${request.id} returning *`.execute(
          trx,
        );
        return { status: 200, body: requestView(updated.rows[0]!) };
      });
    },
  });
}

/** A request as every read gets it: its row (db.ts) and its booked refund's state. */
export type RefundRequestRow = LedgerDatabase['refund_requests'] & {
  /** From the booked refund (joined), when there is one. */
  refund_status?: 'pending' | 'completed' | 'failed' | null;
  refund_amount_micro?: bigint | null;
  refund_tx_hash?: string | null;
};

/** Refund requests with their booked refund's state (left join), for every read of a request. */
export const requestsWithRefund = sql`(select rr.*, r.status as refund_status, r.amount_micro as refund_amount_micro,
    r.refund_tx_hash from refund_requests rr left join refunds r on r.id = rr.refund_id)`;

export function requestView(row: RefundRequestRow) {
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

const nothingRefundable = () =>
  new HttpError(409, LedgerReason.NothingRefundable, 'this transaction has nothing left to refund');

/** The signed chain and validity window of a buyer's refund request (the signature covers both). */
export function checkRefundRequestSigning(
  body: { chainId?: number; nonce?: string; expiresAt?: string },
  chainId: number,
  now: Date,
): { chainId: number; nonce: string; expiresAt: string } {
  for (const field of ['chainId', 'nonce', 'expiresAt'] as const)
    if (body[field] === undefined) throw badRequest(field, 'is required (signed with the request)');
  if (body.chainId !== chainId)
    throw badRequest('chainId', `must be ${chainId}, the chain Paygate books here`);
  const expiresAtMs = Date.parse(body.expiresAt!);
  if (!(expiresAtMs > now.getTime()))
    throw badRequest('expiresAt', 'must be in the future: the signed request expired, sign a new one');
  if (expiresAtMs > now.getTime() + REFUND_REQUEST_MAX_VALIDITY_MS + 60_000)
    throw badRequest('expiresAt', 'must be at most 24 hours ahead');
  return { chainId, nonce: body.nonce!, expiresAt: body.expiresAt! };
}

/**
 * Files a buyer's refund request on the transaction it names (locked): only its payer may, while something is
 * refundable, once per signed request; the same signed request again answers the pending request it made.
 */
export async function fileRefundRequest(
  trx: LedgerTrx,
  deps: LedgerDeps,
  target: RefundTarget,
  body: { reason: string; signature: string },
  signer: string,
) {
  const txn = await findTransactionForUpdate(trx, deps, target);
  if (signer.toLowerCase() !== txn.payer.toLowerCase()) {
    throw new HttpError(
      403,
      LedgerReason.NotPayer,
      'only the wallet that paid this transaction can ask for its refund',
      {
        field: 'signature',
        rule: 'must be signed by the payer wallet',
      },
    );
  }
  if (txn.escrow_status === 'reversed' || txn.refunded_micro >= txn.amount_micro) throw nothingRefundable();
  const pendingRequest = await pendingRequestFor(trx, txn.id, body.signature.toLowerCase());
  if (pendingRequest) return { view: requestView(pendingRequest), replayed: true };
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
  return { view: requestView(request), replayed: false };
}

/** The pending request this signed request made (a retry), or undefined; a replay or another pending one: 409. */
async function pendingRequestFor(
  trx: LedgerTrx,
  transactionId: string,
  signature: string,
): Promise<RefundRequestRow | undefined> {
  // A signed request is good once: the same signature on a decided request is a replay.
  const decided = await trx
    .selectFrom('refund_requests')
    .select('id')
    .where('transaction_id', '=', transactionId)
    .where('signature', '=', signature)
    .where('status', '<>', 'pending')
    .limit(1)
    .executeTakeFirst();
  if (decided)
    throw new HttpError(
      409,
      LedgerReason.RefundRequestReplayed,
      'this signed refund request was already filed and decided; sign a new one',
      {
        field: 'signature',
        rule: 'must sign a new request (fresh nonce)',
        refundRequestId: decided.id,
      },
    );
  const pending = await sql<RefundRequestRow>`select * from refund_requests
    where transaction_id = ${transactionId} and status = 'pending'`.execute(trx);
  const pendingRequest = pending.rows[0];
  if (pendingRequest) {
    // The same signed request again (a retry whose answer was lost): the request it made, nothing raised twice.
    if (pendingRequest.signature === signature) return pendingRequest;
    // Another request while one is pending: name it, so the payer can follow it on the status route.
    throw new HttpError(
      409,
      LedgerReason.RefundRequestPending,
      'a refund request for this transaction is already pending',
      { refundRequestId: pendingRequest.id },
    );
  }
  return undefined;
}

/** Merchant approval of a pending request: books the refund (all that remains by default), raises refund.approved. */
export async function approveRefundRequest(
  trx: LedgerTrx,
  deps: LedgerDeps,
  requestId: string,
  sellerId: string,
  amountMicro: bigint | undefined,
) {
  const request = await lockPendingRequest(trx, requestId, sellerId);
  const txn = await lockSellerTransaction(trx, request.transaction_id, sellerId);
  // No amount means all that remains: when nothing does, say so rather than blame an amount the seller did not send.
  if (amountMicro === undefined && txn.escrow_status !== 'reversed' && txn.refunded_micro >= txn.amount_micro)
    throw nothingRefundable();
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
}

export async function lockPendingRequest(trx: LedgerTrx, id: string, sellerId: string) {
  const rows =
    await sql<RefundRequestRow>`select * from refund_requests where id = ${id} and seller_id = ${sellerId} for update`.execute(
      trx,
    );
  const request = rows.rows[0];
  if (!request) throw notFound('refund request');
  if (request.status !== 'pending') {
    throw new HttpError(
      409,
      LedgerReason.RefundRequestNotPending,
      `this refund request is already ${request.status}`,
    );
  }
  return request;
}
