import { enqueueEvent } from '@paygate/bus';
import { createEvent } from '@paygate/contracts';
import {
  type AnyRoute,
  badRequest,
  defineRoute,
  HttpError,
  idempotencyKeyParameter,
  notFound,
} from '@paygate/http';
import { formatUsdc, MoneyFormatError, parseUsdc } from '@paygate/money';
import { REFUND_REQUEST_MAX_VALIDITY_MS, refundRequestMessage } from '@paygate/protocol';
import type { ServiceContext } from '@paygate/runtime';
import type { SellerAuth } from '@paygate/seller-auth';
import { verifyMessage } from 'ethers';
import type { Request } from 'express';
import { sql } from 'kysely';
import type { LedgerDeps } from '../deps';
import { RefundIdParam, RefundRequestIdParam, SELLER_ERRORS } from '../http/schemas';
import { sendStored, withIdempotency } from '../idempotency';
import { newRefundRequestId } from '../ids';
import { bookRefund, lockSellerTransaction, type RefundRow, refundView } from './book';
import {
  ApproveBody,
  Refund,
  RefundBody,
  RefundCreated,
  RefundRequest,
  RefundRequestApproved,
  RefundRequestBody,
  RefundRequestList,
  RefundRequestListQuery,
  RejectBody,
  TransactionLookup,
  TransactionLookupQuery,
} from './schemas';
import { findRequestedTransaction, findTransactionForUpdate, refundTargetOf } from './targets';

/** The exact text a payer signs (EIP-191 personal_sign) to ask for a refund; defined in @paygate/protocol. */
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
  /** The payer's signature over the request message, lowercase. */
  signature: string;
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

const sellerOf = (req: { seller?: { sellerId: string } }) => req.seller!.sellerId;
/** withIdempotency reads the express request (method, route, params, body, Idempotency-Key). */
const expressRequest = (req: unknown) => req as Request;

const idempotencyKey = idempotencyKeyParameter(
  'Per seller: the same key with the same request answers the stored response (nothing is booked twice; header Idempotent-Replayed: true); the same key with another request is 409 idempotency_key_reused.',
);

const FEE_RULE =
  'Fee rule: a refund is split like the payment: the seller bears 95% and the platform returns its 5% fee in proportion. ' +
  'The split is cumulative (seller part = floor(total refunded x 95%) - what the seller already bore), so partial refunds add up exactly to the original shares. ' +
  'While the payment is held (phase in_escrow) both parts come out of the holds: the refund is instant and nothing is owed. ' +
  'After release (available, settling or settled; phase after_release) the seller part is debited from the seller balance and the platform part from platform revenue. ' +
  'Escrow is shared: a refund is paid only from what the seller still has with Paygate (held + available, plus any credit an operator granted); the available balance may go negative (owed, recovered from later settlements) only while held money covers it, otherwise 409 insufficient_seller_balance names available, held, creditLimit and shortfall. ' +
  'The USDC is sent back to the payer wallet by settlement (refund.initiated -> refund.completed with refundTxHash); the refund is pending until then.';

const SIGNING_FIELDS = { chainId: '<chainId>', nonce: '<nonce>', expiresAt: '<expiresAt>' };
const SIGNED_MESSAGE = refundRequestMessage({ transactionId: '<transactionId>' }, '<reason>', SIGNING_FIELDS);
const SIGNED_MESSAGE_TX = refundRequestMessage(
  { txHash: '<txHash>', logIndex: 0 },
  '<reason>',
  SIGNING_FIELDS,
).replace('log index: 0\n', 'log index: <logIndex>\n');
const SIGNED_MESSAGE_SESSION = refundRequestMessage({ sessionId: '<sessionId>' }, '<reason>', SIGNING_FIELDS);

/** The signed chain and validity window of a buyer's refund request (the signature covers both). */
function checkRefundRequestSigning(
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

export function refundRoutes(ctx: ServiceContext, deps: LedgerDeps, auth: SellerAuth): AnyRoute[] {
  const seller = { scheme: 'apiKey', middleware: auth.middleware() };
  // Seller refund: instant from the hold while in escrow, else debited from the seller's balance.
  const create = defineRoute({
    method: 'post',
    path: '/api/v1/refunds',
    operationId: 'createRefund',
    summary: 'Refund (part of) a transaction of the calling seller',
    description: `Any transaction of the seller may be refunded, in one or several parts, up to its amount. Instant while the funds are in escrow, otherwise the seller balance is debited. ${FEE_RULE}`,
    auth: seller,
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
      '400': 'invalid_request: a field breaks a rule (error.field, error.rule); amount must be > 0',
      ...SELLER_ERRORS,
      '404': 'not_found: no such transaction for this seller',
      '409':
        'amount_exceeds_refundable (error.refundable says what remains) | insufficient_seller_balance (error.available, error.held, error.creditLimit, error.shortfall: the seller no longer has the money with Paygate) | insufficient_platform_revenue | transaction_reversed | idempotency_key_reused',
    },
    handler: async (req, res) => {
      const body = req.body;
      const amountMicro = parseAmount(body.amount)!;
      const sellerId = sellerOf(req);
      const response = await ctx.inTransaction((trx) =>
        withIdempotency(trx, expressRequest(req), sellerId, async () => {
          const txn = await lockSellerTransaction(trx, body.transactionId, sellerId);
          const refund = await bookRefund(trx, deps, txn, { amountMicro, reason: body.reason });
          return { status: 201, body: { ...refundView(refund), remainingRefundable: remaining(txn) } };
        }),
      );
      sendStored(res, response);
    },
  });

  const one = defineRoute({
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

  // Public: which ledger transaction a checkout session or an on-chain transfer became (the widget's
  // PaymentResult.transactionId). Mounted before /api/v1/transactions/:id.
  const lookup = defineRoute({
    method: 'get',
    path: '/api/v1/transactions/lookup',
    operationId: 'lookupTransaction',
    summary: 'Public: the ledger transaction a checkout session or an on-chain transfer became',
    description:
      'What a buyer or the checkout widget knows (sessionId, or txHash and logIndex) to the ledger transactionId and what is still refundable. A payment is booked a moment after it is confirmed: 404 transaction_not_found until then.',
    query: TransactionLookupQuery,
    responses: { '200': { description: 'the transaction', schema: TransactionLookup } },
    errors: {
      '400': 'invalid_request: neither or both of sessionId and txHash, or logIndex needed',
      '404': 'transaction_not_found',
    },
    handler: async (req, res) => {
      const query = req.query;
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
    },
  });

  // Buyer refund request: only the payer, proven by a wallet signature over the request. The payment is named by
  // its transactionId, its transfer (txHash [+ logIndex]) or its checkout session (sessionId).
  const request = defineRoute({
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
      const outcome = await ctx.inTransaction(async (trx) => {
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
        // A signed request is good once: the same signature on a decided request is a replay.
        const decided = await sql<{
          id: string;
        }>`select id from refund_requests where transaction_id = ${txn.id}
          and signature = ${body.signature.toLowerCase()} and status <> 'pending' limit 1`.execute(trx);
        if (decided.rows[0])
          throw new HttpError(
            409,
            'refund_request_replayed',
            'this signed refund request was already filed and decided; sign a new one',
            {
              field: 'signature',
              rule: 'must sign a new request (fresh nonce)',
              refundRequestId: decided.rows[0].id,
            },
          );
        const pending = await sql<RefundRequestRow>`select * from refund_requests
          where transaction_id = ${txn.id} and status = 'pending'`.execute(trx);
        const pendingRequest = pending.rows[0];
        if (pendingRequest) {
          // The same signed request again (a retry whose answer was lost; a wallet signs the same message
          // the same way): the request it made, nothing raised twice.
          if (pendingRequest.signature === body.signature.toLowerCase()) {
            return { view: requestView(pendingRequest), replayed: true };
          }
          // Another request while one is pending: name it, so the payer can follow it on the status route.
          throw new HttpError(
            409,
            'refund_request_pending',
            'a refund request for this transaction is already pending',
            { refundRequestId: pendingRequest.id },
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
        return { view: requestView(request), replayed: false };
      });
      if (outcome.replayed) res.setHeader('Idempotent-Replayed', 'true');
      res.status(outcome.replayed ? 200 : 201).json(outcome.view);
    },
  });

  const list = defineRoute({
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

  // The buyer's status route: public (the rrq_ id is unguessable); with a seller key, only that seller's.
  const sellerIfKeyed = auth.middleware();
  const status = defineRoute({
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

  // Merchant approval makes the refund (the whole remaining amount unless `amount` says less).
  const approve = defineRoute({
    method: 'post',
    path: '/api/v1/refund-requests/:id/approve',
    operationId: 'approveRefundRequest',
    summary:
      'Merchant: approve a pending request; books the refund (all that remains unless amount says less)',
    description: FEE_RULE,
    auth: seller,
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
      '400': 'invalid_request',
      ...SELLER_ERRORS,
      '404': 'not_found: no such request for this seller',
      '409':
        'refund_request_not_pending | nothing_refundable (no amount given and nothing remains) | amount_exceeds_refundable | insufficient_seller_balance | insufficient_platform_revenue | transaction_reversed | idempotency_key_reused',
    },
    handler: async (req, res) => {
      const body = req.body ?? {};
      const amountMicro = parseAmount(body.amount);
      const sellerId = sellerOf(req);
      const response = await ctx.inTransaction((trx) =>
        withIdempotency(trx, expressRequest(req), sellerId, async () => {
          const request = await lockPendingRequest(trx, req.params.id, sellerId);
          const txn = await lockSellerTransaction(trx, request.transaction_id, sellerId);
          // No amount means all that remains: when nothing does (the seller refunded it directly meanwhile),
          // say so, as the buyer's create route does, rather than blame an amount the seller did not send.
          if (
            amountMicro === undefined &&
            txn.escrow_status !== 'reversed' &&
            txn.refunded_micro >= txn.amount_micro
          ) {
            throw new HttpError(409, 'nothing_refundable', 'this transaction has nothing left to refund');
          }
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
      sendStored(res, response);
    },
  });

  const reject = defineRoute({
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
      const sellerId = sellerOf(req);
      const response = await ctx.inTransaction((trx) =>
        withIdempotency(trx, expressRequest(req), sellerId, async () => {
          const request = await lockPendingRequest(trx, req.params.id, sellerId);
          const updated = await sql<RefundRequestRow>`update refund_requests set status = 'rejected',
              decision_reason = ${body.reason ?? null}, decided_at = ${deps.now()} where id = ${request.id} returning *`.execute(
            trx,
          );
          return { status: 200, body: requestView(updated.rows[0]!) };
        }),
      );
      sendStored(res, response);
    },
  });

  return [create, one, lookup, request, list, status, approve, reject];
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
