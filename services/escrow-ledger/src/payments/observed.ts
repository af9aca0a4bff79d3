import { enqueueEvent, lockTransferEvents, takeReorgTombstone } from '@paygate/bus';
import { parseChainUsdc } from '@paygate/money';
import { sql } from 'kysely';
import type { LedgerTrx, Row, TransferRow } from '../db';
import type { LedgerDeps, TypedEnvelope } from '../deps';
import { newTransactionId } from '../ids';
import { transferKey } from '../ledger/entries';
import { settleRefundReceivables } from '../refunds/receivables';
import { bookPayments, paymentConfirmedEvent, rebookReversedPayments } from './confirmed';
import { reverseIfOnBlock } from './reorged';
import {
  bookTransfer,
  lockTransfer,
  postTransferIn,
  TRANSFER_LOCK_SCOPE,
  transferEntryKey,
} from './transfer-booking';

/** An update of one transfer row, by its chain, transaction and log index. */
function observedRow(trx: LedgerTrx, chainId: number, txHash: string, logIndex: number) {
  return trx
    .updateTable('transfers')
    .where((eb) => eb.and({ chain_id: chainId, tx_hash: txHash, log_index: logIndex }));
}

type TransferObserved = TypedEnvelope<'transfer.observed'>;

export async function onTransferObserved(
  trx: LedgerTrx,
  event: TransferObserved,
  deps: LedgerDeps,
): Promise<void> {
  const d = event.data;
  const txHash = d.txHash.toLowerCase();
  const inclusion = { chainId: d.chainId, txHash, logIndex: d.logIndex, blockHash: d.blockHash };
  await lockTransferEvents(trx, TRANSFER_LOCK_SCOPE, inclusion);
  if (await takeReorgTombstone(trx, inclusion)) {
    await onStaleObservation(trx, event, deps);
    return;
  }
  const booked = await bookTransfer(trx, {
    chainId: d.chainId,
    txHash,
    logIndex: d.logIndex,
    amountMicro: parseChainUsdc(d.amount),
    from: d.from,
    to: d.to,
    blockNumber: d.blockNumber,
    blockHash: d.blockHash.toLowerCase(),
    at: deps.now(),
  });
  if (booked) {
    // The same transaction mined again at another log index (resent after a reorg): it pays a refunded payer's
    // debt, or a payment reversed as not on chain (or a reorged gateway payment) claims it again.
    await settleRefundReceivables(trx, deps, d.chainId, txHash);
    await rebookReversedPayments(trx, deps, d.chainId, txHash);
    return;
  }
  // Already booked by the claim of its payment (ledger.claim_transfer, before the chain-indexer's CONFIRMATIONS):
  // the observation confirms it, and the chain's amount is the truth.
  const existing = await lockTransfer(trx, d.chainId, txHash, d.logIndex);
  if (!existing) return;
  if (existing.status === 'reorged') {
    await reincludeTransfer(trx, event, existing, deps);
    return;
  }
  await confirmBookedTransfer(trx, event, existing, deps);
}

/** An observation of a block whose reorg was handled first: nothing booked; a claim's booking on it is reversed. */
async function onStaleObservation(trx: LedgerTrx, event: TransferObserved, deps: LedgerDeps): Promise<void> {
  const d = event.data;
  const txHash = d.txHash.toLowerCase();
  deps.logger.warn(
    { transfer: transferKey(d.chainId, txHash, d.logIndex), blockHash: d.blockHash },
    'transfer.observed of a block whose transfer.reorged was handled first; not booked',
  );
  const booked = await lockTransfer(trx, d.chainId, txHash, d.logIndex);
  if (booked) await reverseIfOnBlock(trx, deps, booked, d.blockHash, event.id);
}

/**
 * A transfer booked by a payment's claim, now observed (after CONFIRMATIONS): confirmed in the block it names; an
 * amount above the claim's is booked into suspense (the payment stays as claimed), never the payment again.
 */
async function confirmBookedTransfer(
  trx: LedgerTrx,
  event: TransferObserved,
  existing: TransferRow,
  deps: LedgerDeps,
): Promise<void> {
  const d = event.data;
  const txHash = d.txHash.toLowerCase();
  const amountMicro = parseChainUsdc(d.amount);
  const key = transferKey(d.chainId, txHash, d.logIndex);
  // A transfer seen in another block than before (reorged and re-included before the reorg event was handled)
  // is simply in its new block: the stale transfer.reorged for the old block is then ignored.
  await observedRow(trx, d.chainId, txHash, d.logIndex)
    .set((eb) => ({
      block_number: BigInt(d.blockNumber),
      block_hash: d.blockHash.toLowerCase(),
      to_address: d.to.toLowerCase(),
      chain_confirmed_at: eb.fn.coalesce('chain_confirmed_at', eb.val(deps.now())),
      missing_since_block: null,
    }))
    .execute();
  // `existing` is not reorged (reincludeTransfer takes those), so it stands as booked.
  if (amountMicro > existing.amount_micro) {
    await postTransferIn(trx, {
      idempotencyKey: `transfer_adjust:${key}`,
      amountMicro: amountMicro - existing.amount_micro,
      memo: { transfer: key, reason: 'observed amount above the amount the payment reported' },
    });
    await observedRow(trx, d.chainId, txHash, d.logIndex).set({ amount_micro: amountMicro }).execute();
  } else if (amountMicro !== existing.amount_micro) {
    deps.logger.error(
      { transfer: key, observed: d.amount },
      'observed transfer amount differs from the booked amount; left for an operator',
    );
  }
}

/**
 * A transfer a reorg removed, mined again: a new inclusion into suspense, unclaimed. Only what its claim booked is
 * reinstated, never a second payment: a parked payment, else a reversed gateway payment (checkout re-matches itself).
 */
async function reincludeTransfer(
  trx: LedgerTrx,
  event: TransferObserved,
  transfer: TransferRow,
  deps: LedgerDeps,
): Promise<void> {
  const d = event.data;
  const txHash = d.txHash.toLowerCase();
  const key = transferKey(d.chainId, txHash, d.logIndex);
  const inclusion = transfer.inclusion + 1;
  const amountMicro = parseChainUsdc(d.amount);
  await observedRow(trx, d.chainId, txHash, d.logIndex)
    .set({
      status: 'observed',
      inclusion,
      claimed_by_transaction_id: null,
      amount_micro: amountMicro,
      block_number: BigInt(d.blockNumber),
      block_hash: d.blockHash.toLowerCase(),
      to_address: d.to.toLowerCase(),
      reorged_at: null,
      chain_confirmed_at: deps.now(),
      missing_since_block: null,
    })
    .execute();
  await postTransferIn(trx, {
    idempotencyKey: transferEntryKey(key, inclusion),
    amountMicro,
    memo: { transfer: key, inclusion, blockHash: d.blockHash, reason: 're-included after a reorg' },
  });
  deps.logger.info({ transfer: key, inclusion, blockHash: d.blockHash }, 'reorged transfer included again');
  // Refunded before the reorg dropped it: the money is back, its payer no longer owes the refund.
  if (transfer.refund_id) await settleRefundReceivables(trx, deps, d.chainId, txHash);
  if (!(await bookParkedPayment(trx, event, deps)))
    await rebookReversedPayments(trx, deps, d.chainId, txHash);
}

/** Books the payment parked as a `transfer_reorged` conflict and resolves it; false when none was parked. */
async function bookParkedPayment(trx: LedgerTrx, event: TransferObserved, deps: LedgerDeps) {
  const d = event.data;
  const parked = await sql<
    Row<'payment_conflicts', 'id'> & { payment: Record<string, unknown> }
  >`select id, detail->'payment' as payment
      from payment_conflicts
      where kind = 'transfer_reorged' and status = 'open' and chain_id = ${d.chainId}
        and tx_hash = ${d.txHash.toLowerCase()} and log_index = ${d.logIndex} and detail ? 'payment'
      order by id limit 1 for update`.execute(trx);
  const conflict = parked.rows[0];
  if (!conflict) return false;
  const payment = { ...conflict.payment, transactionId: newTransactionId() };
  const booked = await bookPayments(trx, [payment], deps.now());
  const outcome = booked[0];
  if (outcome?.outcome !== 'booked') return true;
  // Parked by its claim, booked only now: the payment's one payment.confirmed.
  await enqueueEvent(trx, paymentConfirmedEvent(payment as Parameters<typeof paymentConfirmedEvent>[0]));
  await sql`update payment_conflicts set status = 'resolved',
        resolution = ${JSON.stringify({ by: 're-inclusion', transactionId: outcome.transaction_id, eventId: event.id })}::jsonb
      where id = ${conflict.id}`.execute(trx);
  return true;
}
