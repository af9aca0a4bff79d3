import { type Selectable, sql } from 'kysely';
import type { LedgerDatabase, LedgerTrx, Row, TransferRow } from '../db';
import type { LedgerDeps } from '../deps';
import { credit, debit, ensureAccounts, lockAccount, postEntry, transferKey } from '../ledger/entries';
import { perInclusion } from '../payments/transfer-booking';

/**
 * Refund receivables: an unmatched transfer refunded (refunds/unmatched.ts), then dropped by a reorg, so the payer
 * holds a refund of nothing. Its reversal takes the amount out of escrow_asset against the payer's
 * `refund_receivable`, so the ledger stays at the chain with the loss on the books. Mined again (even at another log
 * index), its money pays the debt (D suspense / C refund_receivable) and it stays refunded.
 */

type OpenReceivable = Selectable<LedgerDatabase['refund_receivables']>;

type Arrival = Row<'transfers', 'log_index' | 'inclusion'>;

/**
 * What the payer owes now this inclusion is dropped (once per inclusion; its account created before any balance row
 * is locked): the transfer's amount, or 0 when escrow_asset holds less (the refund cannot stand on a chain where
 * escrow lacks the money, and booking it out would take escrow_asset below the chain).
 */
export async function refundReceivableOnReorg(
  trx: LedgerTrx,
  deps: LedgerDeps,
  transfer: TransferRow,
  refundId: string,
): Promise<{ payer: string; amountMicro: bigint }> {
  const refund = await trx
    .selectFrom('refunds')
    .select('payer')
    .where('id', '=', refundId)
    .executeTakeFirstOrThrow();
  const payer = refund.payer.toLowerCase();
  await ensureAccounts(trx, [['refund_receivable', payer]]);
  const escrow = await lockAccount(trx, 'escrow_asset');
  if (escrow < transfer.amount_micro) {
    deps.logger.error(
      {
        transfer: transferKey(transfer.chain_id, transfer.tx_hash, transfer.log_index),
        refundId,
        escrowAsset: escrow.toString(),
        amount: transfer.amount_micro.toString(),
      },
      'refunded unmatched transfer dropped by a reorg, and escrow holds less than its refund: nothing owed booked',
    );
    return { payer, amountMicro: 0n };
  }
  await trx
    .insertInto('refund_receivables')
    .values({
      chain_id: transfer.chain_id,
      tx_hash: transfer.tx_hash,
      log_index: transfer.log_index,
      inclusion: transfer.inclusion,
      refund_id: refundId,
      payer,
      amount_micro: transfer.amount_micro,
      status: 'open',
      created_at: deps.now(),
    })
    .onConflict((oc) => oc.doNothing())
    .execute();
  return { payer, amountMicro: transfer.amount_micro };
}

/**
 * Settles a transaction's open receivables from its arrivals on the chain again (a later inclusion, or another log
 * index unclaimed, from the payer, of the amount): one receivable per arrival at most, the arrival marked refunded.
 */
export async function settleRefundReceivables(
  trx: LedgerTrx,
  deps: LedgerDeps,
  chainId: number,
  txHash: string,
): Promise<void> {
  const open =
    await sql<OpenReceivable>`select * from refund_receivables where chain_id = ${chainId} and tx_hash = ${txHash} and status = 'open'
      order by created_at, log_index, inclusion for update`.execute(trx);
  for (const receivable of open.rows) {
    const found = await sql<Arrival>`select t.log_index, t.inclusion from transfers t
        where t.chain_id = ${chainId} and t.tx_hash = ${txHash} and t.status = 'observed'
          and t.claimed_by_transaction_id is null and t.amount_micro = ${receivable.amount_micro}
          and t.from_address = ${receivable.payer}
          and (t.refund_id is null or t.refund_id = ${receivable.refund_id})
          and (t.log_index <> ${receivable.log_index} or t.inclusion > ${receivable.inclusion})
          and not exists (select 1 from refund_receivables s where s.chain_id = t.chain_id and s.tx_hash = t.tx_hash
            and s.settled_by_log_index = t.log_index and s.settled_by_inclusion = t.inclusion)
        order by (t.log_index = ${receivable.log_index}) desc, t.log_index
        limit 1 for update of t`.execute(trx);
    const arrival = found.rows[0];
    if (!arrival) continue;
    const arrivalKey = transferKey(chainId, txHash, arrival.log_index);
    const owedKey = perInclusion(transferKey(chainId, txHash, receivable.log_index), receivable.inclusion);
    await postEntry(trx, {
      idempotencyKey: `refund_receivable_settled:${perInclusion(arrivalKey, arrival.inclusion)}`,
      entryType: 'refund_receivable_settled',
      lines: [
        debit('suspense', receivable.amount_micro),
        credit('refund_receivable', receivable.amount_micro, receivable.payer),
      ],
      memo: {
        transfer: arrivalKey,
        inclusion: arrival.inclusion,
        settles: owedKey,
        refundId: receivable.refund_id,
        payer: receivable.payer,
      },
    });
    await trx
      .updateTable('refund_receivables')
      .set({
        status: 'settled',
        settled_at: deps.now(),
        settled_by_log_index: arrival.log_index,
        settled_by_inclusion: arrival.inclusion,
      })
      .where((eb) => eb.and({ chain_id: chainId, tx_hash: txHash, log_index: receivable.log_index }))
      .where('inclusion', '=', receivable.inclusion)
      .execute();
    // The money was refunded already: the arrival can neither pay for anything nor be refunded again.
    await trx
      .updateTable('transfers')
      .set({ refund_id: receivable.refund_id })
      .where((eb) => eb.and({ chain_id: chainId, tx_hash: txHash, log_index: arrival.log_index }))
      .execute();
    deps.logger.warn(
      { transfer: arrivalKey, settles: owedKey, refundId: receivable.refund_id, payer: receivable.payer },
      'refunded transfer on the chain again: its payer no longer owes the refund',
    );
  }
}
