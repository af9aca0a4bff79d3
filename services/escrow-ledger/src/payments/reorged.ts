import { leaveReorgTombstone, lockTransferEvents } from '@paygate/bus';
import { formatUsdc } from '@paygate/money';
import { sql } from 'kysely';
import type { LedgerTrx, TransactionRow, TransferRow } from '../db';
import type { LedgerDeps, TypedEnvelope } from '../deps';
import { credit, debit, entryIdByKey, postEntry, transferKey } from '../ledger/entries';
import { refundReceivableOnReorg, settleRefundReceivables } from '../refunds/receivables';
import { recordConflict } from './conflicts';
import { lockTransfer, perInclusion, TRANSFER_LOCK_SCOPE, transferEntryKey } from './transfer-booking';

interface ReversalCause {
  reason: 'transfer_reorged' | 'not_on_chain';
  memo: Record<string, unknown>;
  eventId: string | null;
}

const reasonTextOf = (cause: ReversalCause) =>
  cause.reason === 'transfer_reorged' ? 'transfer reorged' : 'transfer not on chain';

/** A refund of money that never arrived (the transfer left the chain): the operator's conflict, by transfer. */
function recordReorgAfterRefund(
  trx: LedgerTrx,
  deps: LedgerDeps,
  transfer: TransferRow,
  owed: {
    sellerId: string | null;
    amountMicro: bigint;
    existingTransactionId: string | null;
    detail: Record<string, unknown>;
  },
): Promise<void> {
  return recordConflict(trx, deps, 'reorg_after_refund', {
    chainId: transfer.chain_id,
    txHash: transfer.tx_hash,
    logIndex: transfer.log_index,
    paymentId: null,
    source: null,
    ...owed,
  });
}

/** A transfer left the canonical chain: reverse what it caused (reverseTransfer). */
export async function onTransferReorged(
  trx: LedgerTrx,
  event: TypedEnvelope<'transfer.reorged'>,
  deps: LedgerDeps,
): Promise<void> {
  const d = event.data;
  const txHash = d.txHash.toLowerCase();
  const key = transferKey(d.chainId, txHash, d.logIndex);
  await lockTransferEvents(trx, TRANSFER_LOCK_SCOPE, { chainId: d.chainId, txHash, logIndex: d.logIndex });
  const transfer = await lockTransfer(trx, d.chainId, txHash, d.logIndex);
  // Its transfer.observed of this block has not been handled yet (the transfer is unknown, or was reversed on an
  // earlier block and not booked again on this one): that observation must not book it when it comes.
  if (!transfer || (transfer.status === 'reorged' && transfer.block_hash !== d.blockHash.toLowerCase())) {
    await leaveReorgTombstone(trx, { ...d, txHash }, event.id);
    deps.logger.info(
      { transfer: key, blockHash: d.blockHash },
      'transfer.reorged before its transfer.observed; tombstone left',
    );
    return;
  }
  // Booked by a payment's claim before any observation named its block: this block's transfer.observed is still to
  // come (delivered after the reorg), and must find the transfer not on the chain rather than mined again.
  if (!transfer.block_hash && transfer.status !== 'reorged') {
    await leaveReorgTombstone(trx, { ...d, txHash }, event.id);
  }
  await reverseIfOnBlock(trx, deps, transfer, d.blockHash, event.id);
}

/** Reverses a locked booked transfer on `blockHash`; one on another block (mined again) or reversed is left. */
export async function reverseIfOnBlock(
  trx: LedgerTrx,
  deps: LedgerDeps,
  transfer: TransferRow,
  blockHash: string,
  eventId: string,
): Promise<void> {
  if (transfer.status === 'reorged') return;
  if (transfer.block_hash && transfer.block_hash !== blockHash.toLowerCase()) {
    deps.logger.info(
      {
        transfer: transferKey(transfer.chain_id, transfer.tx_hash, transfer.log_index),
        reorgedBlock: blockHash,
        currentBlock: transfer.block_hash,
      },
      'transfer.reorged for a block the transfer is no longer in; it is included in another: nothing reversed',
    );
    return;
  }
  await reverseTransfer(trx, deps, transfer, {
    reason: 'transfer_reorged',
    memo: { blockHash },
    eventId,
  });
}

/**
 * Reverses a locked booked transfer that is not on the chain: the transaction that claimed it back into suspense
 * (reverseClaimingTransaction), then the transfer out of suspense and escrow_asset. The keys are a reorg's, so a
 * later transfer.reorged of the same inclusion changes nothing.
 */
export async function reverseTransfer(
  trx: LedgerTrx,
  deps: LedgerDeps,
  transfer: TransferRow,
  cause: ReversalCause,
): Promise<void> {
  const key = transferKey(transfer.chain_id, transfer.tx_hash, transfer.log_index);
  const now = deps.now();
  if (transfer.claimed_by_transaction_id) await reverseClaimingTransaction(trx, deps, transfer, cause, now);
  // Reversing the claiming transaction put all of the transfer back into suspense.
  let stillInSuspense = transfer.amount_micro;
  // A refunded unmatched transfer: the refund cannot be taken back and the money never arrived, so the transfer
  // leaves escrow_asset against what its payer owes (refund_receivable), or the ledger would stay above the chain.
  const owed = transfer.refund_id
    ? await refundReceivableOnReorg(trx, deps, transfer, transfer.refund_id)
    : null;
  if (owed) {
    stillInSuspense = 0n;
    await recordReorgAfterRefund(trx, deps, transfer, {
      sellerId: null,
      amountMicro: transfer.amount_micro,
      existingTransactionId: null,
      detail: {
        eventId: cause.eventId,
        refundId: transfer.refund_id,
        kind: 'unmatched_transfer',
        payer: owed.payer,
        owedByPayer: formatUsdc(owed.amountMicro),
        inclusion: transfer.inclusion,
      },
    });
  }
  const owedMicro = owed?.amountMicro ?? 0n;
  await postEntry(trx, {
    idempotencyKey: `reorg:${perInclusion(key, transfer.inclusion)}`,
    entryType: 'transfer_reversal',
    reversesEntryId: await entryIdByKey(trx, transferEntryKey(key, transfer.inclusion)),
    lines: [
      debit('suspense', stillInSuspense),
      // Only when owed: post_entry creates the account of every line, a zero one too.
      ...(owed && owedMicro > 0n ? [debit('refund_receivable', owedMicro, owed.payer)] : []),
      credit('escrow_asset', stillInSuspense + owedMicro),
    ],
    memo: {
      transfer: key,
      reason: reasonTextOf(cause),
      ...cause.memo,
      ...(owed && owedMicro > 0n
        ? { refundedOwedByPayer: owedMicro.toString(), payer: owed.payer, refundId: transfer.refund_id }
        : {}),
    },
  });
  // Unclaimed: its reversed transaction no longer holds it, so a payment after a re-inclusion can claim it again.
  await trx
    .updateTable('transfers')
    .set({ status: 'reorged', reorged_at: now, claimed_by_transaction_id: null })
    .where((eb) =>
      eb.and({ chain_id: transfer.chain_id, tx_hash: transfer.tx_hash, log_index: transfer.log_index }),
    )
    .execute();
  // The same transaction may be on the chain again already (booked before this reorg was handled): it pays the debt.
  if (owedMicro > 0n) await settleRefundReceivables(trx, deps, transfer.chain_id, transfer.tx_hash);
}

/**
 * Reverses the transaction that claimed the transfer: its unrefunded part from wherever it sits (holds, or
 * seller_available, which may go negative) into suspense, and its refunded part too, owed by the seller.
 */
async function reverseClaimingTransaction(
  trx: LedgerTrx,
  deps: LedgerDeps,
  transfer: TransferRow,
  cause: ReversalCause,
  now: Date,
): Promise<void> {
  const key = transferKey(transfer.chain_id, transfer.tx_hash, transfer.log_index);
  const result =
    await sql<TransactionRow>`select * from transactions where id = ${transfer.claimed_by_transaction_id}
      for update`.execute(trx);
  const txn = result.rows[0]!;
  if (txn.escrow_status === 'reversed') return;
  const sellerPart = txn.seller_share_micro - txn.refunded_seller_micro;
  const platformPart = txn.platform_share_micro - txn.refunded_platform_micro;
  const held = txn.escrow_status === 'held';
  // What was refunded left escrow (or will) though the money never arrived: the whole transfer is reversed, or
  // escrow_asset would stay above the chain by the refund; the seller owes the refunded part.
  const refundedOnChain = txn.refunded_micro;
  await postEntry(trx, {
    idempotencyKey: `reversal:${txn.id}`,
    entryType: 'payment_reversal',
    transactionId: txn.id,
    reversesEntryId: await entryIdByKey(trx, perInclusion(key, transfer.inclusion)),
    lines: [
      debit(held ? 'seller_held' : 'seller_available', sellerPart, txn.seller_id),
      debit(held ? 'platform_held' : 'platform_revenue', platformPart),
      debit('seller_available', refundedOnChain, txn.seller_id),
      credit('suspense', sellerPart + platformPart + refundedOnChain),
    ],
    memo: {
      reason: reasonTextOf(cause),
      transfer: key,
      fromStatus: txn.escrow_status,
      ...(refundedOnChain > 0n ? { refundedOwedBySeller: refundedOnChain.toString() } : {}),
    },
  });
  await sql`update transactions set escrow_status = 'reversed', reversed_at = ${now},
      reversal_reason = ${cause.reason} where id = ${txn.id}`.execute(trx);
  // Released only once CONFIRMATIONS deep: the chain dropped it deeper. The seller owes what was released (maybe
  // paid out); the operator sees it (reversed-after-release).
  if (!held) {
    deps.metrics.conflicts.inc({ kind: 'reversed_after_release' });
    deps.logger.error(
      {
        transfer: key,
        transactionId: txn.id,
        sellerId: txn.seller_id,
        fromStatus: txn.escrow_status,
        owedBySeller: formatUsdc(sellerPart + refundedOnChain),
        reason: cause.reason,
        confirmations: deps.config.confirmations,
      },
      'a released payment is reversed: its transfer left the chain deeper than CONFIRMATIONS; the seller owes it back',
    );
  }
  // The payer keeps a refund of money that never arrived: the operator must see it (the seller owes it now).
  if (refundedOnChain > 0n) {
    await recordReorgAfterRefund(trx, deps, transfer, {
      sellerId: txn.seller_id,
      amountMicro: txn.refunded_micro,
      existingTransactionId: txn.id,
      detail: { eventId: cause.eventId },
    });
  }
}
