import type { TransferBroadcaster } from './broadcast';
import type { TransferReceipt } from './chain';
import type { TransferRow } from './repository';
import { describe, OPEN_BATCH, type TransferWorkerDeps } from './worker-deps';

/** Why a confirmed transfer needs an operator: reported confirmed, it is now mined reverted. */
export const REVERTED_AFTER_CONFIRMATION =
  'reported confirmed, then mined again after a reorg and reverted: no money left escrow; an operator must pay it';

/**
 * What is already recorded: `signed`/`broadcast` transfers are (re)broadcast until a receipt is CONFIRMATIONS deep,
 * then finished with their owner's outcome; `confirmed` ones are watched through the reorg window and sent again
 * (same bytes) if a reorg drops them.
 */
export class ConfirmationWatch {
  constructor(
    private readonly deps: TransferWorkerDeps,
    private readonly broadcaster: TransferBroadcaster,
  ) {}

  /**
   * Confirmed transfers are watched for another CONFIRMATIONS blocks (the reorg window past the one they were
   * confirmed in): one whose receipt disappeared while escrow's nonce for it is not consumed is broadcast again
   * with the SAME recorded bytes (same hash, so the outcome already reported stays true), before any later nonce
   * can be mined. Bounded: OPEN_BATCH rows a pass; final once 2 x CONFIRMATIONS deep.
   */
  async watchConfirmed(): Promise<void> {
    const { ctx, config, chain } = this.deps;
    const watched = await ctx.db
      .selectFrom('outgoing_transfers')
      .selectAll()
      .where('status', '=', 'confirmed')
      .where('final_at', 'is', null)
      .where('chain_id', '=', config.chainId)
      .orderBy('nonce')
      .limit(OPEN_BATCH)
      .execute();
    if (watched.length === 0) return;
    const head = await chain.blockNumber();
    let minedNonce: bigint | undefined;
    for (const transfer of watched) {
      if (this.deps.isStopped()) return;
      const receipt = await chain.receipt(transfer.tx_hash!);
      if (receipt) {
        await this.recordConfirmedDepth(transfer, receipt, head);
        continue;
      }
      minedNonce ??= await chain.minedNonce();
      if (transfer.nonce === null || minedNonce > transfer.nonce) continue; // a lagging node: look again
      await this.resendDroppedConfirmed(transfer);
    }
  }

  /**
   * A final transfer (2 x CONFIRMATIONS deep, its outcome booked by the ledger) that a deeper reorg took off the
   * chain is watched again, so that watchConfirmed sends the SAME signed bytes: its nonce is its idempotency key,
   * so it lands once however often it is sent, and the ledger's decision and booking stand unchanged (same hash).
   * Found by escrow's mined nonce, one read a pass whatever the depth: escrow signs one transaction per nonce
   * (unique per sender), so a nonce the chain counts as used is this transaction's, and a final transfer at or
   * above the mined count is off the chain, unless the node lags (it still has the receipt: nothing done).
   */
  async reopenDroppedFinal(): Promise<void> {
    const { ctx, config, chain } = this.deps;
    const fromEscrow = ctx.db
      .selectFrom('outgoing_transfers')
      .where('chain_id', '=', config.chainId)
      .where('from_address', '=', chain.address.toLowerCase())
      .where('status', '=', 'confirmed')
      .where('final_at', 'is not', null);
    const newest = await fromEscrow.select('nonce').orderBy('nonce', 'desc').limit(1).executeTakeFirst();
    if (newest?.nonce == null) return;
    const minedNonce = await chain.minedNonce();
    if (minedNonce > newest.nonce) return;
    const dropped = await fromEscrow
      .selectAll()
      .where('nonce', '>=', minedNonce)
      .orderBy('nonce')
      .limit(OPEN_BATCH)
      .execute();
    for (const transfer of dropped) {
      if (this.deps.isStopped()) return;
      if (await chain.receipt(transfer.tx_hash!)) continue; // a lagging node's nonce: look again next pass
      const reopened = await ctx.db
        .updateTable('outgoing_transfers')
        .set({ final_at: null })
        .where('transfer_id', '=', transfer.transfer_id)
        .where('final_at', 'is not', null)
        .executeTakeFirst();
      if (Number(reopened.numUpdatedRows) !== 1) continue; // another replica reopened it
      this.deps.metrics.transfersDroppedAfterFinal.inc({ kind: transfer.kind });
      ctx.logger.error(
        {
          transferId: transfer.transfer_id,
          kind: transfer.kind,
          txHash: transfer.tx_hash,
          nonce: transfer.nonce?.toString(),
          block: transfer.block_number?.toString(),
        },
        'final transfer dropped by a reorg deeper than the watch; watching it again to send the same signed bytes',
      );
    }
  }

  /**
   * A watched transfer still mined: its block is kept up to date, and it is final once 2 x CONFIRMATIONS deep.
   * Mined reverted (a reorg dropped it and the same bytes came back where they fail; anyone may send them again from
   * the public mempool), the outcome its owner was told is false: no money left escrow. That is not undone here
   * (the owner booked it as paid out); it is final with the reason recorded, counted and logged as an error.
   */
  private async recordConfirmedDepth(
    transfer: TransferRow,
    receipt: TransferReceipt,
    head: bigint,
  ): Promise<void> {
    const finalDepth = 2n * BigInt(this.deps.config.confirmations);
    const final = head - receipt.blockNumber + 1n >= finalDepth;
    const revertedFinal = final && receipt.status !== 1;
    if (final || receipt.blockNumber !== transfer.block_number) {
      await this.deps.ctx.db
        .updateTable('outgoing_transfers')
        .set({
          block_number: receipt.blockNumber,
          ...(final ? { final_at: new Date() } : {}),
          ...(revertedFinal ? { last_error: REVERTED_AFTER_CONFIRMATION } : {}),
        })
        .where('transfer_id', '=', transfer.transfer_id)
        .execute();
    }
    if (revertedFinal) {
      this.deps.metrics.transfersRevertedAfterConfirmation.inc({ kind: transfer.kind });
      this.deps.ctx.logger.error(
        { transferId: transfer.transfer_id, kind: transfer.kind, txHash: transfer.tx_hash },
        REVERTED_AFTER_CONFIRMATION,
      );
    }
  }

  /** A confirmed transfer a reorg dropped, its nonce not consumed: the recorded bytes are sent again. */
  private async resendDroppedConfirmed(transfer: TransferRow): Promise<void> {
    const { ctx, chain } = this.deps;
    if (!(await this.broadcaster.wouldSucceedNow(transfer))) return;
    ctx.logger.warn(
      { transferId: transfer.transfer_id, txHash: transfer.tx_hash, nonce: transfer.nonce!.toString() },
      'confirmed transfer dropped by a reorg; broadcasting the recorded transaction again',
    );
    try {
      await chain.broadcast(transfer.raw_tx!, transfer.tx_hash!);
    } catch (error) {
      ctx.logger.warn(
        { transferId: transfer.transfer_id, txHash: transfer.tx_hash, reason: describe(error) },
        'rebroadcast after a reorg failed; will retry',
      );
      return;
    }
    await ctx.db
      .updateTable('outgoing_transfers')
      .set((eb) => ({
        last_broadcast_at: new Date(),
        reorg_rebroadcasts: eb('reorg_rebroadcasts', '+', 1),
        broadcast_attempts: eb('broadcast_attempts', '+', 1),
      }))
      .where('transfer_id', '=', transfer.transfer_id)
      .execute();
  }

  async advanceOpen(): Promise<void> {
    const { ctx, config, chain } = this.deps;
    const open = await ctx.db
      .selectFrom('outgoing_transfers')
      .selectAll()
      .where('status', 'in', ['signed', 'broadcast'])
      .where('chain_id', '=', config.chainId)
      .orderBy('nonce')
      .limit(OPEN_BATCH)
      .execute();
    let head: bigint | undefined;
    for (const transfer of open) {
      if (this.deps.isStopped()) return;
      const receipt = await chain.receipt(transfer.tx_hash!);
      if (receipt) {
        head ??= await chain.blockNumber();
        await this.onReceipt(transfer, receipt, head);
        continue;
      }
      await this.rebroadcastIfDue(transfer);
    }
  }

  /**
   * Finished once deep enough; before that, its block is recorded. A success is reported at CONFIRMATIONS and then
   * watched to 2 x CONFIRMATIONS (watchConfirmed): a reorg in between is answered by sending the same bytes again.
   * A revert is reported only at 2 x CONFIRMATIONS, the depth a success becomes final: its owner then gives the
   * reserved money back (a payout is made again), and a reorg past the revert could still mine the same signed
   * bytes successfully, paying twice.
   */
  private async onReceipt(transfer: TransferRow, receipt: TransferReceipt, head: bigint): Promise<void> {
    const confirmations = head - receipt.blockNumber + 1n;
    const succeeded = receipt.status === 1;
    const reportAt = BigInt(this.deps.config.confirmations) * (succeeded ? 1n : 2n);
    if (confirmations >= reportAt) {
      await this.finish(transfer, succeeded, receipt.blockNumber);
    } else if (transfer.status === 'signed' || transfer.block_number !== receipt.blockNumber) {
      // Mined (so broadcast); its block is kept so that a reorg taking it away is noticed at once below.
      await this.broadcaster.markBroadcast(transfer.transfer_id, false, receipt.blockNumber);
    }
  }

  /** No receipt: sent now if never sent, dropped by a reorg, or unanswered for TX_TIMEOUT_MS. */
  private async rebroadcastIfDue(transfer: TransferRow): Promise<void> {
    const { ctx, config } = this.deps;
    const lastSentMs = transfer.last_broadcast_at?.getTime() ?? 0;
    // Mined before and now without a receipt: a reorg dropped it, so it is sent again now, not TX_TIMEOUT_MS on.
    const droppedByReorg = transfer.block_number !== null;
    const due =
      transfer.status === 'signed' || droppedByReorg || Date.now() - lastSentMs >= config.txTimeoutMs;
    if (!due) return;
    if (droppedByReorg) {
      if (!(await this.broadcaster.wouldSucceedNow(transfer))) return;
      ctx.logger.warn(
        {
          transferId: transfer.transfer_id,
          txHash: transfer.tx_hash,
          block: transfer.block_number?.toString(),
        },
        'transfer mined, then dropped by a reorg before CONFIRMATIONS; rebroadcasting the recorded transaction',
      );
    } else if (transfer.status === 'broadcast') {
      ctx.logger.warn(
        { transferId: transfer.transfer_id, txHash: transfer.tx_hash },
        'transfer has no receipt after TX_TIMEOUT_MS; rebroadcasting the recorded transaction',
      );
    }
    await this.broadcaster.broadcastRecorded(transfer);
  }

  /** The state change and the owner's outcome in one transaction, guarded so that only one replica does it. */
  private async finish(transfer: TransferRow, succeeded: boolean, blockNumber: bigint): Promise<void> {
    const reason = 'the transaction reverted on chain';
    const finished = await this.deps.ctx.inTransaction(async (trx) => {
      const updated = await trx
        .updateTable('outgoing_transfers')
        .set(
          succeeded
            ? { status: 'confirmed', confirmed_at: new Date(), block_number: blockNumber, last_error: null }
            : { status: 'failed', failed_at: new Date(), block_number: blockNumber, last_error: reason },
        )
        .where('transfer_id', '=', transfer.transfer_id)
        .where('status', 'in', ['signed', 'broadcast'])
        .returningAll()
        .executeTakeFirst();
      if (!updated) return undefined; // another replica finished it
      const handler = this.deps.handlers[updated.kind];
      if (succeeded) await handler.onConfirmed(trx, updated);
      else await handler.onFailed(trx, updated, reason);
      return updated;
    });
    if (finished) this.reportFinished(finished, succeeded);
  }

  private reportFinished(finished: TransferRow, succeeded: boolean): void {
    const { ctx, metrics } = this.deps;
    if (succeeded) {
      metrics.transferSent(finished.kind);
      ctx.logger.info(
        { transferId: finished.transfer_id, kind: finished.kind, txHash: finished.tx_hash },
        'transfer confirmed',
      );
    } else {
      metrics.transfersFailed.inc({ kind: finished.kind });
      ctx.logger.error(
        { transferId: finished.transfer_id, kind: finished.kind, txHash: finished.tx_hash },
        'transfer reverted on chain',
      );
    }
  }
}
