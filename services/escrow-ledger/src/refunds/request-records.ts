import { enqueueEvent } from '@paygate/bus';
import { createEvent } from '@paygate/contracts';
import { badRequest, HttpError, notFound } from '@paygate/http';
import { formatUsdc } from '@paygate/money';
import { REFUND_REQUEST_MAX_VALIDITY_MS, type RefundTarget } from '@paygate/protocol';
import { sql } from 'kysely';
import type { LedgerDatabase, LedgerTrx } from '../db';
import type { LedgerDeps } from '../deps';
import { newRefundRequestId } from '../ids';
import { LedgerReason } from '../reasons';
import { bookRefund, lockSellerTransaction, refundView } from './book';
import { findTransactionForUpdate } from './targets';

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
