import type { ConsumerOptions } from '@paygate/bus';
import { enqueueEvent } from '@paygate/bus';
import { createEvent, type EventData } from '@paygate/contracts';
import { formatUsdc, parseChainUsdc } from '@paygate/money';
import type { Transaction } from 'kysely';
import type { Clock } from '../clock';
import type { SettlementConfig } from '../config';
import type { SettlementDB } from '../db';
import { TransferCapExceededError, WrongChainError } from '../errors';
import type { SettlementMetrics } from '../metrics';
import { TransferRefusal } from '../reasons';
import type { EscrowChain } from '../transfers/chain';
import { recordTransfer } from '../transfers/repository';
import type { TransferOutcomeHandler } from '../transfers/worker';

/**
 * `refund.initiated` (the ledger booked a refund) -> a refund record and an outgoing transfer keyed by refundId,
 * in the inbox transaction; the transfer worker signs, records, broadcasts and confirms it. Both kinds (a seller's
 * payment, or an unmatched transfer without transaction or seller) are sent the same way, to `payer`.
 *
 * Only the ledger's bus user may publish `refund.initiated` (the permissions generated from @paygate/contracts), in
 * the transaction that booked the refund; above MAX_TRANSFER_USDC nothing is recorded and the event is retried, then
 * dead-lettered for an operator. A copy records nothing more (one transfer per refundId).
 */
export function refundInitiatedConsumer(
  config: SettlementConfig,
  chain: EscrowChain,
  metrics: SettlementMetrics,
  onTransferRecorded: () => void,
): ConsumerOptions<'refund.initiated', SettlementDB> {
  return {
    durable: 'settlement-refund-initiated',
    subject: 'refund.initiated',
    async handler(trx, event) {
      const refund = event.data;
      const amountMicro = sendableAmount(config, metrics, refund);
      await recordRefundTransfer(trx, config, chain, refund, amountMicro);
    },
    afterCommit: () => onTransferRecorded(),
  };
}

type RefundInitiated = EventData<'refund.initiated'>;

/** The refund's amount in micro-USDC, once it is on this settlement's chain and within MAX_TRANSFER_USDC. */
function sendableAmount(
  config: SettlementConfig,
  metrics: SettlementMetrics,
  refund: RefundInitiated,
): bigint {
  if (refund.chainId !== config.chainId) {
    // Not ours to send: retried, then parked on the dead-letter subject for an operator.
    throw new WrongChainError(refund.refundId, refund.chainId, config.chainId);
  }
  // The ledger's booked amount of money that came from the chain (an unmatched transfer may exceed the typed cap).
  const amountMicro = parseChainUsdc(refund.amount);
  if (amountMicro > parseChainUsdc(config.maxTransferUsdc)) {
    metrics.transfersRefused.inc({ kind: 'refund', reason: TransferRefusal.ExceedsTransferCap });
    throw new TransferCapExceededError(
      refund.refundId,
      refund.amount,
      formatUsdc(parseChainUsdc(config.maxTransferUsdc)),
    );
  }
  return amountMicro;
}

/** The outgoing transfer keyed by refundId, then the refund record pointing at it (a copy adds nothing). */
async function recordRefundTransfer(
  db: Transaction<SettlementDB>,
  config: SettlementConfig,
  chain: EscrowChain,
  refund: RefundInitiated,
  amountMicro: bigint,
): Promise<void> {
  const transferId = await recordTransfer(db, {
    kind: 'refund',
    idempotencyKey: refund.refundId,
    chainId: config.chainId,
    tokenAddress: chain.usdcAddress,
    fromAddress: chain.address,
    toAddress: refund.payer,
    amountMicro,
  });
  await db
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
      refund_tx_hash: null,
      initiated_at: new Date(refund.initiatedAt),
      completed_at: null,
    })
    .onConflict((oc) => oc.column('refund_id').doNothing())
    .execute();
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
      // Nothing left escrow (reverted or never signed): the refund stays visible as failed for an operator.
      await trx
        .updateTable('refunds')
        .set({ status: 'failed' })
        .where('transfer_id', '=', transfer.transfer_id)
        .where('status', '=', 'sending')
        .execute();
    },
  };
}
