import type { EventData, EventEnvelope } from '@paygate/contracts';
import { PLATFORM_FEE_PERCENT, parseChainUsdc } from '@paygate/money';
import { sql, type Transaction } from 'kysely';
import type { LedgerTrx } from '../db';
import type { LedgerDeps } from '../deps';
import { newTransactionId } from '../ids';
import { credit, debit, entryIdByKey, postEntry, transferKey } from '../ledger/entries';

interface BookedPayment {
  payment_id: string;
  outcome: 'booked' | 'duplicate' | 'conflict' | 'conflict_seen';
  transaction_id: string | null;
  conflict_kind: string | null;
  existing_transaction_id: string | null;
}

/** The one call of the database's book_payments (sql/ledger.sql); the fee comes from @paygate/money's definition. */
async function bookPayments(trx: LedgerTrx, payments: object[], now: Date): Promise<BookedPayment[]> {
  const result =
    await sql<BookedPayment>`select * from book_payments(${JSON.stringify(payments)}::jsonb, ${now},
      ${PLATFORM_FEE_PERCENT.toString()}::integer)`.execute(trx);
  return result.rows;
}

export interface TransferRow {
  chain_id: number;
  tx_hash: string;
  log_index: number;
  amount_micro: bigint;
  status: 'observed' | 'reorged';
  booked_by: string;
  claimed_by_transaction_id: string | null;
  /** 0 for the first inclusion in a block; +1 each time it is mined again after a reorg removed it. */
  inclusion: number;
  block_hash: string | null;
  /** Set when the transfer, unclaimed, was sent back to its payer (refunds/unmatched.ts). */
  refund_id: string | null;
}

/** What an inclusion causes is keyed per inclusion: `<key>` for the first, `<key>#<n>` after re-inclusions. */
const perInclusion = (key: string, inclusion: number) => (inclusion > 0 ? `${key}#${inclusion}` : key);
const transferEntryKey = (key: string, inclusion = 0) => `transfer:${perInclusion(key, inclusion)}`;

async function lockTransfer(
  trx: Transaction<any>,
  chainId: number,
  txHash: string,
  logIndex: number,
): Promise<TransferRow | undefined> {
  const result =
    await sql<TransferRow>`select chain_id, tx_hash, log_index, amount_micro, status, booked_by, claimed_by_transaction_id,
        inclusion, block_hash, refund_id
      from transfers where chain_id = ${chainId} and tx_hash = ${txHash} and log_index = ${logIndex} for update`.execute(
      trx,
    );
  return result.rows[0];
}

/**
 * Books money arriving in the escrow wallet: debit escrow_asset, credit suspense. Inserting the transfer row
 * and posting are one step, so whichever of transfer.observed and payment.confirmed comes first books it and
 * the other finds it booked.
 */
async function bookTransfer(
  trx: Transaction<any>,
  input: {
    chainId: number;
    txHash: string;
    logIndex: number;
    amountMicro: bigint;
    from: string;
    to: string | null;
    blockNumber: number | null;
    blockHash: string | null;
    bookedBy: 'transfer.observed' | 'payment.confirmed';
    at: Date;
  },
): Promise<boolean> {
  const inserted =
    await sql`insert into transfers (chain_id, tx_hash, log_index, amount_micro, from_address, to_address,
        block_number, block_hash, status, booked_by, observed_at, chain_confirmed_at)
      values (${input.chainId}, ${input.txHash}, ${input.logIndex}, ${input.amountMicro}, ${input.from.toLowerCase()},
        ${input.to?.toLowerCase() ?? null}, ${input.blockNumber}, ${input.blockHash}, 'observed', ${input.bookedBy}, ${input.at},
        ${input.bookedBy === 'transfer.observed' ? input.at : null})
      on conflict do nothing`.execute(trx);
  if (Number(inserted.numAffectedRows ?? 0n) === 0) return false;
  const key = transferKey(input.chainId, input.txHash, input.logIndex);
  await postEntry(trx, {
    idempotencyKey: transferEntryKey(key),
    entryType: 'transfer_in',
    lines: [debit('escrow_asset', input.amountMicro), credit('suspense', input.amountMicro)],
    memo: { transfer: key, from: input.from.toLowerCase(), bookedBy: input.bookedBy },
  });
  return true;
}

export async function onTransferObserved(
  trx: Transaction<any>,
  event: EventEnvelope<'transfer.observed', EventData<'transfer.observed'>>,
  deps: LedgerDeps,
): Promise<void> {
  const d = event.data;
  const txHash = d.txHash.toLowerCase();
  const amountMicro = parseChainUsdc(d.amount);
  const booked = await bookTransfer(trx, {
    chainId: d.chainId,
    txHash,
    logIndex: d.logIndex,
    amountMicro,
    from: d.from,
    to: d.to,
    blockNumber: d.blockNumber,
    blockHash: d.blockHash.toLowerCase(),
    bookedBy: 'transfer.observed',
    at: deps.now(),
  });
  if (booked) {
    // The same transaction mined again at another log index (resent after a reorg dropped it): its payment,
    // reversed as not on chain, claims it again.
    await rebookPaymentsNotOnChain(trx, deps, d.chainId, txHash);
    return;
  }
  // Already booked from a payment.confirmed that arrived first: the chain's amount is the truth.
  const existing = await lockTransfer(trx, d.chainId, txHash, d.logIndex);
  if (!existing) return;
  if (existing.status === 'reorged') {
    await reincludeTransfer(trx, event, existing, deps);
    return;
  }
  // A transfer seen in another block than before (reorged and re-included before the reorg event was handled)
  // is simply in its new block: the stale transfer.reorged for the old block is then ignored.
  // The indexer publishes after CONFIRMATIONS: a transfer booked from payment.confirmed is confirmed by the chain now.
  await sql`update transfers set block_number = ${d.blockNumber}, block_hash = ${d.blockHash.toLowerCase()},
        to_address = ${d.to.toLowerCase()}, chain_confirmed_at = coalesce(chain_confirmed_at, ${deps.now()}),
        missing_since_block = null
      where chain_id = ${d.chainId} and tx_hash = ${txHash} and log_index = ${d.logIndex}`.execute(trx);
  if (existing.status === 'observed' && amountMicro > existing.amount_micro) {
    const key = transferKey(d.chainId, txHash, d.logIndex);
    const extra = amountMicro - existing.amount_micro;
    await postEntry(trx, {
      idempotencyKey: `transfer_adjust:${key}`,
      entryType: 'transfer_in',
      lines: [debit('escrow_asset', extra), credit('suspense', extra)],
      memo: { transfer: key, reason: 'observed amount above the amount the payment reported' },
    });
    await sql`update transfers set amount_micro = ${amountMicro}
        where chain_id = ${d.chainId} and tx_hash = ${txHash} and log_index = ${d.logIndex}`.execute(trx);
  } else if (amountMicro !== existing.amount_micro) {
    deps.logger.error(
      { transfer: transferKey(d.chainId, txHash, d.logIndex), observed: d.amount },
      'observed transfer amount differs from the booked amount; left for an operator',
    );
  }
}

/**
 * A transfer that a reorg removed was mined again (same chainId:txHash:logIndex, another block): the money is in
 * the escrow wallet again, so it is booked again as a new inclusion (into suspense, unclaimed). Its reversed
 * transaction stays reversed (history); the payment claims it anew: either a payment.confirmed still to come
 * (checkout re-matches its reopened session), or one that arrived while the transfer was still reorged and was
 * parked as a `transfer_reorged` conflict, which is booked now and the conflict resolved.
 */
async function reincludeTransfer(
  trx: Transaction<any>,
  event: EventEnvelope<'transfer.observed', EventData<'transfer.observed'>>,
  transfer: TransferRow,
  deps: LedgerDeps,
): Promise<void> {
  const d = event.data;
  const txHash = d.txHash.toLowerCase();
  const key = transferKey(d.chainId, txHash, d.logIndex);
  const inclusion = transfer.inclusion + 1;
  const amountMicro = parseChainUsdc(d.amount);
  await sql`update transfers set status = 'observed', inclusion = ${inclusion}, claimed_by_transaction_id = null,
        amount_micro = ${amountMicro}, block_number = ${d.blockNumber},
        block_hash = ${d.blockHash.toLowerCase()}, to_address = ${d.to.toLowerCase()},
        reorged_at = null, chain_confirmed_at = ${deps.now()}, missing_since_block = null
      where chain_id = ${d.chainId} and tx_hash = ${txHash} and log_index = ${d.logIndex}`.execute(trx);
  await postEntry(trx, {
    idempotencyKey: transferEntryKey(key, inclusion),
    entryType: 'transfer_in',
    lines: [debit('escrow_asset', amountMicro), credit('suspense', amountMicro)],
    memo: { transfer: key, inclusion, blockHash: d.blockHash, reason: 're-included after a reorg' },
  });
  deps.logger.info({ transfer: key, inclusion, blockHash: d.blockHash }, 'reorged transfer included again');
  const parked = await sql<{
    id: bigint;
    payment: Record<string, unknown>;
  }>`select id, detail->'payment' as payment
      from payment_conflicts
      where kind = 'transfer_reorged' and status = 'open' and chain_id = ${d.chainId} and tx_hash = ${txHash}
        and log_index = ${d.logIndex} and detail ? 'payment'
      order by id limit 1 for update`.execute(trx);
  const conflict = parked.rows[0];
  if (!conflict) {
    await rebookPaymentsNotOnChain(trx, deps, d.chainId, txHash);
    return;
  }
  const payment = { ...conflict.payment, transactionId: newTransactionId() };
  const booked = await bookPayments(trx, [payment], deps.now());
  const outcome = booked[0];
  if (outcome?.outcome !== 'booked') return;
  await sql`update payment_conflicts set status = 'resolved',
        resolution = ${JSON.stringify({ by: 're-inclusion', transactionId: outcome.transaction_id, eventId: event.id })}::jsonb
      where id = ${conflict.id}`.execute(trx);
}

export type ConflictKind =
  | 'transfer_already_claimed'
  | 'amount_exceeds_transfer'
  | 'transfer_reorged'
  | 'reorg_after_refund'
  | 'transfer_refunded'
  | 'refund_refused';

/** Records a conflict for the operator (once per kind, transfer and payment), counted and logged. */
export async function recordConflict(
  trx: Transaction<any>,
  deps: LedgerDeps,
  kind: ConflictKind,
  input: {
    chainId: number;
    txHash: string;
    logIndex: number;
    paymentId: string | null;
    source: string | null;
    sellerId: string | null;
    amountMicro: bigint | null;
    existingTransactionId: string | null;
    detail: Record<string, unknown>;
  },
): Promise<void> {
  const inserted =
    await sql`insert into payment_conflicts (kind, chain_id, tx_hash, log_index, payment_id, source, seller_id,
        amount_micro, existing_transaction_id, detail, created_at)
      values (${kind}, ${input.chainId}, ${input.txHash}, ${input.logIndex}, ${input.paymentId}, ${input.source},
        ${input.sellerId}, ${input.amountMicro}, ${input.existingTransactionId}, ${JSON.stringify(input.detail)}::jsonb, ${deps.now()})
      on conflict do nothing`.execute(trx);
  if (Number(inserted.numAffectedRows ?? 0n) > 0) {
    deps.metrics.conflicts.inc({ kind });
    deps.logger.warn(
      {
        kind,
        transfer: transferKey(input.chainId, input.txHash, input.logIndex),
        paymentId: input.paymentId,
        existingTransactionId: input.existingTransactionId,
      },
      'payment conflict surfaced to the operator; nothing credited',
    );
  }
}

/**
 * Payments claim their transfers: each amount moves from suspense into holds for the seller (95%) and the
 * platform (5%). A transfer pays for one thing: a claim by another payment is refused and surfaced to an
 * operator. The booking itself is the database function book_payments (one round trip for the whole batch);
 * this wrapper supplies ids and the clock and reports conflicts.
 */
export async function onPaymentsConfirmed(
  trx: Transaction<any>,
  events: Array<EventEnvelope<'payment.confirmed', EventData<'payment.confirmed'>>>,
  deps: LedgerDeps,
): Promise<void> {
  if (events.length === 0) return;
  const payments = events.map(({ id, data: d }) => ({
    eventId: id,
    transactionId: newTransactionId(),
    paymentId: d.paymentId,
    source: d.source,
    sellerId: d.sellerId,
    skillId: d.skillId,
    skillName: d.skillName,
    endpointId: d.endpointId,
    sessionId: d.sessionId,
    payer: d.payer,
    network: d.network,
    chainId: d.chainId,
    txHash: d.txHash,
    logIndex: d.logIndex,
    amountMicro: parseChainUsdc(d.amount).toString(),
    holdPeriodHours: d.holdPeriodHours,
    confirmedAt: d.confirmedAt,
  }));
  // Transfers are locked in one order (chain, hash, log) in every batch, so two batches cannot wait on each other
  // crosswise; the sort is stable, so claims on the same transfer keep their delivery order (the first wins).
  const order = (p: (typeof payments)[number]) => `${p.chainId}:${p.txHash.toLowerCase()}:${p.logIndex}`;
  payments.sort((a, b) => (order(a) < order(b) ? -1 : order(a) > order(b) ? 1 : 0));
  const outcomes = await bookPayments(trx, payments, deps.now());
  for (const row of outcomes) {
    if (row.outcome !== 'conflict') continue;
    deps.metrics.conflicts.inc({ kind: row.conflict_kind ?? 'unknown' });
    deps.logger.warn(
      {
        kind: row.conflict_kind,
        paymentId: row.payment_id,
        existingTransactionId: row.existing_transaction_id,
      },
      'payment conflict surfaced to the operator; nothing credited',
    );
  }
}

interface ClaimedTransaction {
  id: string;
  seller_id: string;
  amount_micro: bigint;
  seller_share_micro: bigint;
  platform_share_micro: bigint;
  refunded_micro: bigint;
  refunded_seller_micro: bigint;
  refunded_platform_micro: bigint;
  escrow_status: string;
}

/**
 * A transfer left the canonical chain: reverse what it caused. The unrefunded part of its transaction is taken
 * back from wherever it sits (holds, or the seller's available balance, which may go negative) into suspense,
 * then the transfer itself is reversed out of suspense and the escrow asset.
 */
export async function onTransferReorged(
  trx: Transaction<any>,
  event: EventEnvelope<'transfer.reorged', EventData<'transfer.reorged'>>,
  deps: LedgerDeps,
): Promise<void> {
  const d = event.data;
  const txHash = d.txHash.toLowerCase();
  const transfer = await lockTransfer(trx, d.chainId, txHash, d.logIndex);
  if (!transfer || transfer.status === 'reorged') return;
  const key = transferKey(d.chainId, txHash, d.logIndex);
  if (transfer.block_hash && transfer.block_hash !== d.blockHash.toLowerCase()) {
    deps.logger.info(
      { transfer: key, reorgedBlock: d.blockHash, currentBlock: transfer.block_hash },
      'transfer.reorged for a block the transfer is no longer in; it is included in another: nothing reversed',
    );
    return;
  }
  await reverseTransfer(trx, deps, transfer, {
    reason: 'transfer_reorged',
    memo: { blockHash: d.blockHash },
    eventId: event.id,
  });
}

/**
 * Reverses a booked transfer that is not on the chain (locked by the caller, status `observed`): the unrefunded part
 * of the transaction that claimed it is taken back from wherever it sits (holds, or the seller's available
 * balance, which may go negative) into suspense, then the transfer itself out of suspense and the escrow asset.
 * The entries' keys are those of a reorg, so a later transfer.reorged for the same inclusion changes nothing.
 */
export async function reverseTransfer(
  trx: Transaction<any>,
  deps: LedgerDeps,
  transfer: TransferRow,
  cause: {
    reason: 'transfer_reorged' | 'not_on_chain';
    memo: Record<string, unknown>;
    eventId: string | null;
  },
): Promise<void> {
  const d = { chainId: transfer.chain_id, logIndex: transfer.log_index };
  const txHash = transfer.tx_hash;
  const key = transferKey(d.chainId, txHash, d.logIndex);
  const event = { id: cause.eventId };
  const reasonText = cause.reason === 'transfer_reorged' ? 'transfer reorged' : 'transfer not on chain';
  const now = deps.now();
  let stillInSuspense = transfer.amount_micro;
  if (transfer.claimed_by_transaction_id) {
    const result =
      await sql<ClaimedTransaction>`select id, seller_id, amount_micro, seller_share_micro, platform_share_micro,
          refunded_micro, refunded_seller_micro, refunded_platform_micro, escrow_status
        from transactions where id = ${transfer.claimed_by_transaction_id} for update`.execute(trx);
    const txn = result.rows[0]!;
    if (txn.escrow_status !== 'reversed') {
      const sellerPart = txn.seller_share_micro - txn.refunded_seller_micro;
      const platformPart = txn.platform_share_micro - txn.refunded_platform_micro;
      const held = txn.escrow_status === 'held';
      await postEntry(trx, {
        idempotencyKey: `reversal:${txn.id}`,
        entryType: 'payment_reversal',
        transactionId: txn.id,
        reversesEntryId: await entryIdByKey(trx, perInclusion(key, transfer.inclusion)),
        lines: [
          debit(held ? 'seller_held' : 'seller_available', sellerPart, txn.seller_id),
          debit(held ? 'platform_held' : 'platform_revenue', platformPart),
          credit('suspense', sellerPart + platformPart),
        ],
        memo: { reason: reasonText, transfer: key, fromStatus: txn.escrow_status },
      });
      await sql`update transactions set escrow_status = 'reversed', reversed_at = ${now},
          reversal_reason = ${cause.reason} where id = ${txn.id}`.execute(trx);
      // Money refunded on chain cannot be taken back from suspense: the operator must see it.
      stillInSuspense = transfer.amount_micro - txn.refunded_micro;
      if (txn.refunded_micro > 0n) {
        await recordConflict(trx, deps, 'reorg_after_refund', {
          chainId: d.chainId,
          txHash,
          logIndex: d.logIndex,
          paymentId: null,
          source: null,
          sellerId: txn.seller_id,
          amountMicro: txn.refunded_micro,
          existingTransactionId: txn.id,
          detail: { eventId: event.id },
        });
      }
    }
  }
  if (transfer.refund_id) {
    // An unmatched transfer already booked out of suspense into a refund: the refund (pending or sent) cannot be
    // taken back here, so only what is still in suspense (nothing) is reversed and the operator must see it.
    stillInSuspense = 0n;
    await recordConflict(trx, deps, 'reorg_after_refund', {
      chainId: d.chainId,
      txHash,
      logIndex: d.logIndex,
      paymentId: null,
      source: null,
      sellerId: null,
      amountMicro: transfer.amount_micro,
      existingTransactionId: null,
      detail: { eventId: event.id, refundId: transfer.refund_id, kind: 'unmatched_transfer' },
    });
  }
  await postEntry(trx, {
    idempotencyKey: `reorg:${perInclusion(key, transfer.inclusion)}`,
    entryType: 'transfer_reversal',
    reversesEntryId: await entryIdByKey(trx, transferEntryKey(key, transfer.inclusion)),
    lines: [debit('suspense', stillInSuspense), credit('escrow_asset', stillInSuspense)],
    memo: { transfer: key, reason: reasonText, ...cause.memo },
  });
  // Unclaimed: its reversed transaction no longer holds it, so a payment after a re-inclusion can claim it again.
  await sql`update transfers set status = 'reorged', reorged_at = ${now}, claimed_by_transaction_id = null
      where chain_id = ${d.chainId} and tx_hash = ${txHash} and log_index = ${d.logIndex}`.execute(trx);
}

interface ReversedPayment {
  id: string;
  payment_id: string;
  source: string;
  seller_id: string;
  skill_id: string | null;
  skill_name: string | null;
  endpoint_id: string | null;
  session_id: string | null;
  payer: string;
  network: string;
  amount_micro: bigint;
  hold_period_hours: number;
  confirmed_at: Date;
}

/**
 * A payment reversed because its transfer was not on the chain, whose very transaction (same hash: the relayer
 * resends the same signed bytes) is on the chain again and booked unclaimed: the payment claims it again, as a new
 * transaction, at the transfer's current log index (a re-mined transaction's log index is that of its new block).
 * Matched by chain, transaction hash, payer and amount, so it is the same money; a payment is live at most once.
 */
export async function rebookPaymentsNotOnChain(
  trx: Transaction<any>,
  deps: LedgerDeps,
  chainId: number,
  txHash: string,
): Promise<number> {
  const reversed =
    await sql<ReversedPayment>`select t.id, t.payment_id, t.source, t.seller_id, t.skill_id, t.skill_name,
        t.endpoint_id, t.session_id, t.payer, t.network, t.amount_micro, t.hold_period_hours, t.confirmed_at
      from transactions t
      where t.chain_id = ${chainId} and t.tx_hash = ${txHash} and t.reversal_reason = 'not_on_chain'
        and not exists (select 1 from transactions live where live.payment_id = t.payment_id
          and live.escrow_status <> 'reversed')
      order by t.created_at, t.id
      limit 10`.execute(trx);
  let rebooked = 0;
  for (const payment of reversed.rows) {
    const target = await sql<{ log_index: number }>`select log_index from transfers
        where chain_id = ${chainId} and tx_hash = ${txHash} and status = 'observed'
          and claimed_by_transaction_id is null and refund_id is null
          and from_address = ${payment.payer} and amount_micro = ${payment.amount_micro}
        order by log_index limit 1 for update`.execute(trx);
    const transfer = target.rows[0];
    if (!transfer) continue;
    const outcome = await bookPayments(
      trx,
      [
        {
          eventId: `rebook:${payment.id}`,
          transactionId: newTransactionId(),
          paymentId: payment.payment_id,
          source: payment.source,
          sellerId: payment.seller_id,
          skillId: payment.skill_id,
          skillName: payment.skill_name,
          endpointId: payment.endpoint_id,
          sessionId: payment.session_id,
          payer: payment.payer,
          network: payment.network,
          chainId,
          txHash,
          logIndex: transfer.log_index,
          amountMicro: payment.amount_micro.toString(),
          holdPeriodHours: payment.hold_period_hours,
          confirmedAt: payment.confirmed_at.toISOString(),
        },
      ],
      deps.now(),
    );
    if (outcome[0]?.outcome !== 'booked') continue;
    rebooked += 1;
    deps.logger.info(
      {
        paymentId: payment.payment_id,
        reversedTransactionId: payment.id,
        transactionId: outcome[0].transaction_id,
        transfer: transferKey(chainId, txHash, transfer.log_index),
      },
      'payment reversed as not on chain is on chain again; booked again',
    );
  }
  return rebooked;
}
