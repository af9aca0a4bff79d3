import { crashIfConfigured } from '../crash';
import { describe } from '../errors';
import type { TransferRow } from './repository';
import type { TransferWorkerDeps } from './worker';

/** Sends recorded transactions (the SAME signed bytes, never re-signed) and records that they were sent. */
export class TransferBroadcaster {
  constructor(private readonly deps: TransferWorkerDeps) {}

  /** A transaction a reorg dropped waits for the money it was paid from (a sweep the reorg dropped too). */
  async wouldSucceedNow(transfer: TransferRow): Promise<boolean> {
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
    const { ctx, chain, config } = this.deps;
    try {
      await chain.broadcast(transfer.raw_tx!, transfer.tx_hash!);
    } catch (error) {
      ctx.logger.warn(
        { transferId: transfer.transfer_id, txHash: transfer.tx_hash, reason: describe(error, 500) },
        'broadcast failed; will retry the same transaction',
      );
      await ctx.db
        .updateTable('outgoing_transfers')
        .set((eb) => ({
          last_error: describe(error, 500),
          broadcast_attempts: eb('broadcast_attempts', '+', 1),
        }))
        .where('transfer_id', '=', transfer.transfer_id)
        .execute();
      return;
    }
    crashIfConfigured(config, 'after_broadcast');
    await this.markBroadcast(transfer.transfer_id, true);
  }

  async markBroadcast(transferId: string, sentNow: boolean, minedIn: bigint | null = null): Promise<void> {
    await this.deps.ctx.db
      .updateTable('outgoing_transfers')
      .set((eb) => ({
        status: 'broadcast',
        last_error: null,
        // The block it was seen mined in, or null once it is sent again (no block holds it now).
        block_number: minedIn,
        ...(sentNow
          ? { last_broadcast_at: new Date(), broadcast_attempts: eb('broadcast_attempts', '+', 1) }
          : {}),
      }))
      .where('transfer_id', '=', transferId)
      .where('status', 'in', ['signed', 'broadcast'])
      .execute();
  }
}
