import { randomBytes } from 'node:crypto';
import { enqueueEvent } from '@paygate/bus';
import { createEvent } from '@paygate/contracts';
import { HttpError } from '@paygate/http';
import { formatUsdcExact } from '@paygate/money';
import { currentTraceCarrier } from '@paygate/telemetry';
import type { CheckoutTrx, SessionRow, TransferRow } from '../db';
import { enqueueSessionEvent } from '../sessions/snapshot';
import type { LedgerClaims } from './claims';
import { applyToSession, type MatchingDeps, outcomeFor, sessionPaymentOf } from './session-payments';
import { lockSession, lockTransferById } from './transfer-rows';

/** An operator action the ledger refused because the transfer is not this action's to spend. */
export interface ClaimRefusal {
  refused: { status: 409; code: string; message: string; claimedBy?: string };
  transfer: TransferRow;
}

const newRefundRequestId = () => `trr_${randomBytes(12).toString('hex')}`;

/** Unmatched reasons for money that is not USDC in this escrow wallet on this chain (the ledger never booked it). */
const NOT_IN_ESCROW_REASONS = new Set(['wrong_token', 'wrong_recipient', 'wrong_chain']);

/** Operator: apply an unmatched transfer to a session (paid, paid_late, underpaid or overpaid by amount). */
export async function attachTransfer(
  deps: MatchingDeps,
  trx: CheckoutTrx,
  transferId: string,
  sessionId: string,
  note: string | null,
) {
  const transfer = await lockTransferById(trx, transferId);
  if (transfer.status !== 'unmatched') {
    throw new HttpError(409, 'transfer_not_unmatched', `transfer is ${transfer.status}, not unmatched`);
  }
  const session = await lockSession(trx, sessionId).executeTakeFirst();
  if (!session) {
    throw new HttpError(404, 'not_found', 'session not found', { field: 'sessionId', rule: 'must exist' });
  }
  if (session.transfer_id !== null) {
    throw new HttpError(409, 'session_already_paid', `session is ${session.status} by another transfer`, {
      field: 'sessionId',
      rule: 'must not have a transfer already',
    });
  }
  const now = deps.config.now();
  const outcome = outcomeFor(session, transfer.amount_micro, now);
  // The ledger books the session's payment with checkout's claim (none for an underpaid session).
  const payment = sessionPaymentOf(session, transfer, outcome);
  const claim = await deps.claims.claim(transfer, 'checkout', sessionId, { payment });
  if (!claim.ok) return refusal(deps, trx, transfer, claim);
  const attached = await trx
    .updateTable('transfers')
    .set({
      status: 'attached',
      session_id: sessionId,
      resolution_note: note,
      resolved_at: now,
      updated_at: now,
    })
    .where('transfer_id', '=', transferId)
    .returningAll()
    .executeTakeFirstOrThrow();
  const paymentId = claim.paymentId ?? payment?.paymentId;
  const updated = await applyToSession(deps, trx, session, attached, outcome, paymentId);
  return { transfer: attached, session: updated };
}

/**
 * Operator: return an unmatched transfer, or an `underpaid` session's short one (the session becomes `refunded`),
 * with `transfer.refund_requested` in the same commit, under a row lock so a second mark is a 409.
 */
export async function markTransferForRefund(
  deps: MatchingDeps,
  trx: CheckoutTrx,
  transferId: string,
  note: string | null,
) {
  const now = deps.config.now();
  const { transfer, session } = await lockRefundableTransfer(trx, transferId);
  // Decided now by the owner of the money: a transfer a payment claimed meanwhile is refused (409), not
  // marked and then dropped by the ledger. An underpaid session's transfer is held by checkout's claim for
  // that session, which paid for nothing: the ledger lets the refund take it over unless a payment is booked.
  const underpaidSessionId = session?.session_id;
  const claim = await deps.claims.claim(transfer, 'operator_refund', transfer.transfer_id, {
    underpaidSessionId,
  });
  if (!claim.ok) return refusal(deps, trx, transfer, claim);
  const refundRequestId = newRefundRequestId();
  const updated = await trx
    .updateTable('transfers')
    .set({
      status: 'refund_requested',
      refund_request_id: refundRequestId,
      resolution_note: note,
      resolved_at: now,
      updated_at: now,
    })
    .where('transfer_id', '=', transferId)
    .where('status', '=', transfer.status)
    .returningAll()
    .executeTakeFirstOrThrow();
  await enqueueRefundRequested(trx, updated, refundRequestId, session, note, now);
  let refundedSession: SessionRow | undefined;
  if (session) {
    // The session took no payment and never will: its amount is free for another session.
    refundedSession = await trx
      .updateTable('sessions')
      .set({ status: 'refunded', amount_reserved: false, updated_at: now })
      .where('session_id', '=', session.session_id)
      .returningAll()
      .executeTakeFirstOrThrow();
    await enqueueSessionEvent(trx, 'checkout.session_refunded', refundedSession, deps.config);
  }
  deps.logger.info(
    {
      transferId,
      refundRequestId,
      sessionId: session?.session_id,
      txHash: updated.tx_hash,
      amount: formatUsdcExact(updated.amount_micro),
    },
    session ? 'underpaid session transfer marked for refund' : 'unmatched transfer marked for refund',
  );
  return { transfer: updated, session: refundedSession };
}

/** The transfer to refund, locked, with its `underpaid` session; 409 unless it is refundable money in escrow. */
async function lockRefundableTransfer(
  trx: CheckoutTrx,
  transferId: string,
): Promise<{ transfer: TransferRow; session: SessionRow | undefined }> {
  const transfer = await lockTransferById(trx, transferId);
  const session = await underpaidSessionOf(trx, transfer);
  if (transfer.status !== 'unmatched' && !session) {
    const paid =
      transfer.status === 'attached' || transfer.status === 'matched'
        ? ': it paid its session (refund the payment with POST /api/v1/refunds)'
        : '';
    throw new HttpError(
      409,
      'transfer_not_unmatched',
      `transfer is ${transfer.status}, not unmatched nor the transfer of an underpaid session${paid}`,
    );
  }
  if (transfer.unmatched_reason && NOT_IN_ESCROW_REASONS.has(transfer.unmatched_reason)) {
    throw new HttpError(
      409,
      'transfer_not_refundable',
      `transfer is ${transfer.unmatched_reason}: it is not USDC in this escrow wallet, so it cannot be refunded from escrow`,
    );
  }
  return { transfer, session };
}

/** transfer.refund_requested (outbox): the ledger books the refund out of suspense, settlement sends it. */
async function enqueueRefundRequested(
  trx: CheckoutTrx,
  updated: TransferRow,
  refundRequestId: string,
  session: SessionRow | undefined,
  note: string | null,
  now: Date,
): Promise<void> {
  await enqueueEvent(
    trx,
    createEvent(
      'transfer.refund_requested',
      'checkout',
      {
        refundRequestId,
        transferId: updated.transfer_id,
        chainId: updated.chain_id,
        txHash: updated.tx_hash,
        logIndex: updated.log_index,
        from: updated.from_address,
        amount: formatUsdcExact(updated.amount_micro),
        reason:
          note ??
          (session
            ? `underpayment of session ${session.session_id} returned to sender`
            : `unmatched transfer (${updated.unmatched_reason ?? 'no reason'}) returned to sender`),
        ...(session ? { sessionId: session.session_id } : {}),
        requestedAt: now.toISOString(),
      },
      { trace: currentTraceCarrier() },
    ),
  );
}

/** The `underpaid` session a transfer (matched at its address, or attached) is the short payment of, locked. */
async function underpaidSessionOf(trx: CheckoutTrx, transfer: TransferRow): Promise<SessionRow | undefined> {
  if ((transfer.status !== 'attached' && transfer.status !== 'matched') || !transfer.session_id)
    return undefined;
  const session = await lockSession(trx, transfer.session_id).executeTakeFirst();
  return session?.status === 'underpaid' && session.transfer_id === transfer.transfer_id
    ? session
    : undefined;
}

/** The ledger refused an operator action: a transfer another payment path spent is recorded as claimed, not left unmatched. */
async function refusal(
  deps: MatchingDeps,
  trx: CheckoutTrx,
  transfer: TransferRow,
  refused: Exclude<Awaited<ReturnType<LedgerClaims['claim']>>, { ok: true }>,
): Promise<ClaimRefusal> {
  if (refused.reason !== 'claimed_elsewhere') {
    return { refused: { status: 409, code: refused.reason, message: refused.message }, transfer };
  }
  const { claimedBy, message } = refused;
  const code = claimedBy === 'operator_refund' ? 'transfer_refunded' : 'transfer_claimed_by_payment';
  // An underpaid session's transfer stays attached to its session: the ledger says a payment holds it.
  if (transfer.status !== 'unmatched')
    return { refused: { status: 409, code, message, claimedBy }, transfer };
  const claimed = await trx
    .updateTable('transfers')
    .set({ status: 'claimed', unmatched_reason: `claimed_by_${claimedBy}`, updated_at: deps.config.now() })
    .where('transfer_id', '=', transfer.transfer_id)
    .returningAll()
    .executeTakeFirstOrThrow();
  const notUnmatched = `${message}; it is not unmatched money (claimed by ${claimedBy})`;
  return { refused: { status: 409, code, message: notUnmatched, claimedBy }, transfer: claimed };
}
