import { enqueueEvent } from '@paygate/bus';
import { createEvent, type EventData } from '@paygate/contracts';
import { formatUsdc, parseChainUsdc } from '@paygate/money';
import { currentTraceCarrier } from '@paygate/telemetry';
import type { LedgerTrx, TransferRow } from '../db';
import type { LedgerDeps, TypedEnvelope } from '../deps';
import { TransferNotBookedError } from '../errors';
import { newRefundId } from '../ids';
import { credit, debit, postEntry, transferKey } from '../ledger/entries';
import { recordConflict } from '../payments/conflicts';
import { bookedTransferDiffers, lockTransfer, perInclusion } from '../payments/transfer-booking';

/** Why a refund request for an unmatched transfer was refused (conflict detail `reason`). */
type UnmatchedRefundRefusal =
  | 'transfer_claimed_by_payment'
  | NonNullable<ReturnType<typeof bookedTransferDiffers>>;

/**
 * An operator sent an unmatched transfer back (checkout's `transfer.refund_requested`): D suspense / C
 * refund_pending and `refund.initiated`, to the payer and amount on the books; else a `refund_refused` conflict
 * (refusalOf). Already refunded: nothing. Not booked yet: throws (redelivered, then dead-lettered).
 */
export async function onTransferRefundRequested(
  trx: LedgerTrx,
  event: TypedEnvelope<'transfer.refund_requested'>,
  deps: LedgerDeps,
): Promise<void> {
  const d = event.data;
  const txHash = d.txHash.toLowerCase();
  const key = transferKey(d.chainId, txHash, d.logIndex);
  const transfer = await lockTransfer(trx, d.chainId, txHash, d.logIndex);
  if (!transfer) throw new TransferNotBookedError(key);
  if (transfer.refund_id) {
    deps.logger.info(
      { transfer: key, refundId: transfer.refund_id, refundRequestId: d.refundRequestId },
      'unmatched transfer already refunded; request ignored',
    );
    return;
  }
  const refusal = refusalOf(d, transfer);
  if (refusal) {
    await recordRefusal(trx, deps, event, transfer, txHash, refusal);
    return;
  }
  await bookUnmatchedRefund(trx, deps, d, transfer, txHash, key);
}

type RefundRequest = EventData<'transfer.refund_requested'>;

/** Why the request is refused (checked in this order), or null when the transfer may be refunded. */
export function refusalOf(
  d: Pick<RefundRequest, 'amount' | 'from'>,
  transfer: Pick<TransferRow, 'claimed_by_transaction_id' | 'status' | 'amount_micro' | 'from_address'>,
): UnmatchedRefundRefusal | null {
  return transfer.claimed_by_transaction_id
    ? 'transfer_claimed_by_payment'
    : bookedTransferDiffers(d, transfer);
}

/** The refused request, as a `refund_refused` conflict for the operator (books nothing). */
async function recordRefusal(
  trx: LedgerTrx,
  deps: LedgerDeps,
  event: TypedEnvelope<'transfer.refund_requested'>,
  transfer: TransferRow,
  txHash: string,
  refusal: UnmatchedRefundRefusal,
): Promise<void> {
  const d = event.data;
  await recordConflict(trx, deps, 'refund_refused', {
    chainId: d.chainId,
    txHash,
    logIndex: d.logIndex,
    paymentId: null,
    source: 'checkout',
    sellerId: null,
    amountMicro: parseChainUsdc(d.amount),
    existingTransactionId: transfer.claimed_by_transaction_id,
    detail: {
      reason: refusal,
      eventId: event.id,
      refundRequestId: d.refundRequestId,
      checkoutTransferId: d.transferId,
      requested: { from: d.from, amount: d.amount },
      booked: {
        from: transfer.from_address,
        amount: formatUsdc(transfer.amount_micro),
        status: transfer.status,
      },
    },
  });
}

async function bookUnmatchedRefund(
  trx: LedgerTrx,
  deps: LedgerDeps,
  d: RefundRequest,
  transfer: TransferRow,
  txHash: string,
  key: string,
): Promise<void> {
  const refundId = newRefundId();
  const now = deps.now();
  const amountMicro = transfer.amount_micro;
  const payer = transfer.from_address.toLowerCase();
  const inclusionKey = perInclusion(key, transfer.inclusion);
  await postEntry(trx, {
    idempotencyKey: `refund_unmatched:${inclusionKey}`,
    entryType: 'refund',
    lines: [debit('suspense', amountMicro), credit('refund_pending', amountMicro)],
    memo: { refundId, transfer: key, refundRequestId: d.refundRequestId, phase: 'in_suspense' },
  });
  await trx
    .insertInto('refunds')
    .values({
      id: refundId,
      kind: 'unmatched_transfer',
      transaction_id: null,
      seller_id: null,
      payer,
      chain_id: d.chainId,
      tx_hash: txHash,
      log_index: d.logIndex,
      amount_micro: amountMicro,
      seller_part_micro: 0n,
      platform_part_micro: 0n,
      phase: 'in_suspense',
      reason: d.reason,
      status: 'pending',
      transfer_refund_request_id: d.refundRequestId,
      created_at: now,
    })
    .execute();
  await trx
    .updateTable('transfers')
    .set({ refund_id: refundId })
    .where((eb) => eb.and({ chain_id: d.chainId, tx_hash: txHash, log_index: d.logIndex }))
    .execute();
  await enqueueEvent(
    trx,
    createEvent(
      'refund.initiated',
      'escrow-ledger',
      {
        refundId,
        kind: 'unmatched_transfer',
        transactionId: null,
        sellerId: null,
        transfer: { txHash, logIndex: d.logIndex },
        payer,
        amount: formatUsdc(amountMicro),
        chainId: d.chainId,
        initiatedAt: now.toISOString(),
      },
      { trace: currentTraceCarrier() },
    ),
  );
  deps.metrics.refundsBooked.inc({ phase: 'in_suspense' });
  deps.logger.info(
    { transfer: key, refundId, refundRequestId: d.refundRequestId, amount: formatUsdc(amountMicro) },
    'unmatched transfer refund booked out of suspense',
  );
}
