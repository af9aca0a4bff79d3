import { enqueueEvent } from '@paygate/bus';
import { createEvent } from '@paygate/contracts';
import { formatUsdc } from '@paygate/money';
import type { Clock } from '../clock';
import { enqueuePayoutFailed } from '../ledger/decisions';
import type { TransferOutcomeHandler } from '../transfers/worker';

/** Ends a settlement with its payout transfer; `settlement.completed` goes out through the outbox. */
export function payoutOutcome(clock: Clock): TransferOutcomeHandler {
  return {
    async onConfirmed(trx, transfer) {
      const completedAt = clock();
      const settlement = await trx
        .updateTable('settlements')
        .set({
          status: 'completed',
          tx_hash: transfer.tx_hash,
          completed_at: completedAt,
          updated_at: completedAt,
        })
        .where('transfer_id', '=', transfer.transfer_id)
        .where('status', '=', 'sending')
        .returningAll()
        .executeTakeFirst();
      if (!settlement) return;
      await enqueueEvent(
        trx,
        createEvent('settlement.completed', 'settlement', {
          settlementId: settlement.settlement_id,
          sellerId: settlement.seller_id,
          amount: formatUsdc(transfer.amount_micro),
          payoutAddress: transfer.to_address,
          txHash: transfer.tx_hash!,
          completedAt: completedAt.toISOString(),
        }),
      );
    },
    async onFailed(trx, transfer, reason) {
      // Nothing left escrow: payout.failed, in the same transaction, has the ledger give the reservation back.
      const settlement = await trx
        .updateTable('settlements')
        .set({ status: 'failed', failure_reason: reason, updated_at: clock() })
        .where('transfer_id', '=', transfer.transfer_id)
        .where('status', '=', 'sending')
        .returning(['settlement_id', 'seller_id'])
        .executeTakeFirst();
      if (!settlement) return;
      await enqueuePayoutFailed(trx, clock, {
        payoutId: settlement.settlement_id,
        kind: 'seller',
        sellerId: settlement.seller_id,
        amount: formatUsdc(transfer.amount_micro),
        reason,
      });
    },
  };
}
