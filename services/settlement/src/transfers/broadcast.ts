import { crashIfConfigured } from '../crash';
import type { TransferRow } from './repository';
import { describe, type TransferWorkerDeps } from './worker-deps';

/** Sends recorded transactions (the SAME signed bytes, never re-signed) and records that they were sent. */
export class TransferBroadcaster {
  constructor(private readonly deps: TransferWorkerDeps) {}

  /**
   * Before a transaction a reorg dropped is sent again: the same pre-flight as before signing. The reorg may also
   * have dropped money it was paid from (a sweep into escrow, sent again by the relayer); mined before that, the
   * same bytes would revert and the payout fail. Escrow's later nonces wait behind this one meanwhile, so waiting a
   * pass (or a few) for the balance costs nothing; bounded by the passes themselves.
   */
  async wouldSucceedNow(transfer: TransferRow): Promise<boolean> {
    try {
      await this.deps.chain.estimateTransferGas(transfer.to_address, transfer.amount_micro);
      return true;
    } catch (error) {
      this.deps.ctx.logger.warn(
        { transferId: transfer.transfer_id, txHash: transfer.tx_hash, reason: describe(error) },
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
        { transferId: transfer.transfer_id, txHash: transfer.tx_hash, reason: describe(error) },
        'broadcast failed; will retry the same transaction',
      );
      await ctx.db
        .updateTable('outgoing_transfers')
        .set((eb) => ({ last_error: describe(error), broadcast_attempts: eb('broadcast_attempts', '+', 1) }))
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
