import { crashIfConfigured } from '../config';
import { broadcastCounted, OPEN_BATCH } from '../db';
import { describe } from '../errors';
import type { TransferReceipt } from './chain';
import type { TransferRow } from './repository';
import type { TransferWorkerDeps } from './worker';

/** Why a confirmed transfer needs an operator: reported confirmed, it is now mined reverted. */
export const REVERTED_AFTER_CONFIRMATION =
  'reported confirmed, then mined again after a reorg and reverted: no money left escrow; an operator must pay it';

/** Sends the recorded bytes (never re-signed) until deep enough, then finishes; watches confirmed ones for reorgs. */
export class ConfirmationWatch {
  constructor(private readonly deps: TransferWorkerDeps) {}

  /** Confirmed transfers to 2 x CONFIRMATIONS: one a reorg dropped is sent again as the SAME bytes. */
  async watchConfirmed(): Promise<void> {
    const { chain } = this.deps;
    const watched = await this.byNonce(['confirmed']).where('final_at', 'is', null).execute();
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
      if (minedNonce > transfer.nonce!) continue; // a lagging node: look again
      await this.resendDroppedConfirmed(transfer);
    }
  }

  /** This chain's transfers in `statuses`, a batch by nonce. */
  private byNonce(statuses: Array<TransferRow['status']>) {
    return this.deps.ctx.db
      .selectFrom('outgoing_transfers')
      .selectAll()
      .where('status', 'in', statuses)
      .where('chain_id', '=', this.deps.config.chainId)
      .orderBy('nonce')
      .limit(OPEN_BATCH);
  }

  /** A final transfer a deeper reorg dropped (its nonce unused: escrow signs one per nonce) is watched again. */
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

  /** Final at 2 x CONFIRMATIONS; mined reverted after a reorg, it is final with the reason, for an operator. */
  private async recordConfirmedDepth(transfer: TransferRow, receipt: TransferReceipt, head: bigint) {
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
    const { ctx } = this.deps;
    if (!(await this.wouldSucceedNow(transfer))) return;
    ctx.logger.warn(
      { transferId: transfer.transfer_id, txHash: transfer.tx_hash, nonce: transfer.nonce!.toString() },
      'confirmed transfer dropped by a reorg; broadcasting the recorded transaction again',
    );
    if ((await this.send(transfer, 'rebroadcast after a reorg failed; will retry')) !== undefined) return;
    await ctx.db
      .updateTable('outgoing_transfers')
      .set(broadcastCounted({ reorg: true }))
      .where('transfer_id', '=', transfer.transfer_id)
      .execute();
  }

  async advanceOpen(): Promise<void> {
    const { chain } = this.deps;
    const open = await this.byNonce(['signed', 'broadcast']).execute();
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
   * A success is reported at CONFIRMATIONS, a revert only at 2 x CONFIRMATIONS (where a success is final): a shallower
   * reorg could still mine the same bytes successfully after the money was given back.
   */
  private async onReceipt(transfer: TransferRow, receipt: TransferReceipt, head: bigint): Promise<void> {
    const confirmations = head - receipt.blockNumber + 1n;
    const succeeded = receipt.status === 1;
    const reportAt = BigInt(this.deps.config.confirmations) * (succeeded ? 1n : 2n);
    if (confirmations >= reportAt) {
      await this.finish(transfer, succeeded, receipt.blockNumber);
    } else if (transfer.status === 'signed' || transfer.block_number !== receipt.blockNumber) {
      // Mined (so broadcast); its block is kept so that a reorg taking it away is noticed at once below.
      await this.markBroadcast(transfer.transfer_id, false, receipt.blockNumber);
    }
  }

  /** No receipt: sent now if never sent, dropped by a reorg, or unanswered for TX_TIMEOUT_MS. */
  private async rebroadcastIfDue(transfer: TransferRow): Promise<void> {
    const { ctx, config } = this.deps;
    const lastSentMs = transfer.last_broadcast_at?.getTime() ?? 0;
    // Mined before and now without a receipt: sent again now, not TX_TIMEOUT_MS on.
    const droppedByReorg = transfer.block_number !== null;
    const due =
      transfer.status === 'signed' || droppedByReorg || Date.now() - lastSentMs >= config.txTimeoutMs;
    if (!due) return;
    if (droppedByReorg) {
      if (!(await this.wouldSucceedNow(transfer))) return;
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
    await this.broadcastRecorded(transfer);
  }

  /** The state change and the owner's outcome in one transaction, once across replicas. */
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
    if (!finished) return;
    const { kind } = finished;
    if (succeeded) this.deps.metrics.transferSent(kind);
    else this.deps.metrics.transfersFailed.inc({ kind });
    this.deps.ctx.logger[succeeded ? 'info' : 'error'](
      { transferId: finished.transfer_id, kind, txHash: finished.tx_hash },
      succeeded ? 'transfer confirmed' : 'transfer reverted on chain',
    );
  }

  /** A transaction a reorg dropped waits for the money it was paid from (a sweep the reorg dropped too). */
  private async wouldSucceedNow(transfer: TransferRow): Promise<boolean> {
    try {
      await this.deps.chain.estimateTransferGas(transfer.to_address, transfer.amount_micro);
      return true;
    } catch (error) {
      this.deps.ctx.logger.warn(
        { transferId: transfer.transfer_id, txHash: transfer.tx_hash, reason: describe(error, 500) },
        'transfer dropped by a reorg would not succeed now; sent again once escrow covers it',
      );
      return false;
    }
  }

  async broadcastRecorded(transfer: TransferRow): Promise<void> {
    const refusal = await this.send(transfer, 'broadcast failed; will retry the same transaction');
    if (refusal !== undefined) {
      await this.deps.ctx.db
        .updateTable('outgoing_transfers')
        .set((eb) => ({ last_error: refusal, broadcast_attempts: eb('broadcast_attempts', '+', 1) }))
        .where('transfer_id', '=', transfer.transfer_id)
        .execute();
      return;
    }
    crashIfConfigured(this.deps.config, 'after_broadcast');
    await this.markBroadcast(transfer.transfer_id, true);
  }

  /** Sends the recorded bytes; a refusal is logged with `failedMessage` and its reason returned. */
  private async send(transfer: TransferRow, failedMessage: string): Promise<string | undefined> {
    try {
      await this.deps.chain.broadcast(transfer.raw_tx!, transfer.tx_hash!);
      return undefined;
    } catch (error) {
      const reason = describe(error, 500);
      this.deps.ctx.logger.warn(
        { transferId: transfer.transfer_id, txHash: transfer.tx_hash, reason },
        failedMessage,
      );
      return reason;
    }
  }

  private async markBroadcast(transferId: string, sent: boolean, minedIn: bigint | null = null) {
    await this.deps.ctx.db
      .updateTable('outgoing_transfers')
      .set({
        status: 'broadcast',
        last_error: null,
        // The block it was seen mined in, or null once it is sent again (no block holds it now).
        block_number: minedIn,
        ...(sent ? broadcastCounted() : {}),
      })
      .where('transfer_id', '=', transferId)
      .where('status', 'in', ['signed', 'broadcast'])
      .execute();
  }
}
