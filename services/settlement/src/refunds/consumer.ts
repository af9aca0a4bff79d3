import { type ConsumerOptions, enqueueEvent } from '@paygate/bus';
import { createEvent } from '@paygate/contracts';
import { formatUsdc, parseChainUsdc } from '@paygate/money';
import type { Clock } from '../clock';
import type { SettlementDB } from '../db';
import { TransferCapExceededError, WrongChainError } from '../errors';
import type { DecisionDeps } from '../ledger/decisions';
import { TransferRefusal } from '../reasons';
import { recordTransfer } from '../transfers/repository';
import type { TransferOutcomeHandler } from '../transfers/worker';

/** `refund.initiated` (the ledger's only) -> a transfer to `payer` keyed by refundId and its refund record. */
export function refundInitiatedConsumer(
  deps: DecisionDeps,
): ConsumerOptions<'refund.initiated', SettlementDB> {
  const { config, chain, metrics } = deps;
  return {
    durable: 'settlement-refund-initiated',
    subject: 'refund.initiated',
    async handler(trx, event) {
      const refund = event.data;
      if (refund.chainId !== config.chainId) {
        throw new WrongChainError(refund.refundId, refund.chainId, config.chainId);
      }
      // Money that came from the chain: parsed at chain precision (an unmatched transfer may exceed the typed cap).
      const amountMicro = parseChainUsdc(refund.amount);
      const capMicro = parseChainUsdc(config.maxTransferUsdc);
      if (amountMicro > capMicro) {
        metrics.transfersRefused.inc({ kind: 'refund', reason: TransferRefusal.ExceedsTransferCap });
        throw new TransferCapExceededError(refund.refundId, refund.amount, formatUsdc(capMicro));
      }
      const transferId = await recordTransfer(trx, chain, {
        kind: 'refund',
        idempotencyKey: refund.refundId,
        toAddress: refund.payer,
        amountMicro,
      });
      await trx
        .insertInto('refunds')
        .values({
          refund_id: refund.refundId,
          kind: refund.kind ?? 'payment',
          transaction_id: refund.transactionId,
          seller_id: refund.sellerId,
          payer: refund.payer,
          amount_micro: amountMicro,
          chain_id: refund.chainId,
          status: 'sending',
          transfer_id: transferId,
          initiated_at: new Date(refund.initiatedAt),
        })
        .onConflict((oc) => oc.column('refund_id').doNothing())
        .execute();
    },
    afterCommit: () => deps.onTransferRecorded(),
  };
}

/** Ends a refund with its transfer; `refund.completed` goes out through the outbox in the same transaction. */
export function refundOutcome(clock: Clock): TransferOutcomeHandler {
  return {
    async onConfirmed(trx, transfer) {
      const completedAt = clock();
      const refund = await trx
        .updateTable('refunds')
        .set({ status: 'completed', refund_tx_hash: transfer.tx_hash, completed_at: completedAt })
        .where('transfer_id', '=', transfer.transfer_id)
        .where('status', '=', 'sending')
        .returningAll()
        .executeTakeFirst();
      if (!refund) return;
      await enqueueEvent(
        trx,
        createEvent('refund.completed', 'settlement', {
          event: 'refund.completed',
          refundId: refund.refund_id,
          kind: refund.kind,
          transactionId: refund.transaction_id,
          sellerId: refund.seller_id,
          refundTxHash: transfer.tx_hash!,
          amount: formatUsdc(refund.amount_micro),
          completedAt: completedAt.toISOString(),
        }),
      );
    },
    async onFailed(trx, transfer) {
      // Nothing left escrow: the refund stays failed for an operator.
      await trx
        .updateTable('refunds')
        .set({ status: 'failed' })
        .where('transfer_id', '=', transfer.transfer_id)
        .where('status', '=', 'sending')
        .execute();
    },
  };
}
