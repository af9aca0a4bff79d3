import { Counter, Gauge, type ServiceContext } from '@paygate/runtime';
import type { SettlementDB, TransferKind } from './db';
import { countStuckTransfers } from './transfers/repository';

export type SettlementMetrics = ReturnType<typeof createSettlementMetrics>;

export function createSettlementMetrics(ctx: ServiceContext<SettlementDB>, txTimeoutMs: number) {
  const registers = [ctx.metrics.registry];
  // Each metric spelled as `new Counter({ name: … })`: the alert and dashboard tests find what is exported that way.
  const transfersSent = new Counter({
    name: 'settlement_transfers_sent_total',
    help: 'Outgoing USDC transfers confirmed on chain, by kind',
    labelNames: ['kind'],
    registers,
  });
  const payoutsSent = new Counter({
    name: 'settlement_payouts_sent_total',
    help: 'Seller payouts confirmed on chain',
    registers,
  });
  const refundsSent = new Counter({
    name: 'settlement_refunds_sent_total',
    help: 'Refund transfers confirmed on chain',
    registers,
  });
  return {
    /** Counts a transfer confirmed on chain (money that actually left escrow). */
    transferSent(kind: TransferKind) {
      transfersSent.inc({ kind });
      if (kind === 'payout') payoutsSent.inc();
      else if (kind === 'refund') refundsSent.inc();
    },
    transfersRefused: new Counter({
      name: 'settlement_transfers_refused_total',
      help: 'Transfers out of escrow refused before signing (not authorised by the ledger, or above MAX_TRANSFER_USDC), by kind and reason',
      labelNames: ['kind', 'reason'],
      registers,
    }),
    transfersFailed: new Counter({
      name: 'settlement_transfers_failed_total',
      help: 'Outgoing transfers that reverted or could not be sent, by kind',
      labelNames: ['kind'],
      registers,
    }),
    transfersRevertedAfterConfirmation: new Counter({
      name: 'settlement_transfers_reverted_after_confirmation_total',
      help: 'Transfers reported confirmed, dropped by a reorg and then mined reverted (no money left escrow), by kind',
      labelNames: ['kind'],
      registers,
    }),
    transfersDroppedAfterFinal: new Counter({
      name: 'settlement_transfers_dropped_after_final_total',
      help: 'Transfers final (2 x CONFIRMATIONS deep) that a deeper reorg dropped and the same signed bytes were watched and sent again, by kind',
      labelNames: ['kind'],
      registers,
    }),
    settlementsSkipped: new Counter({
      name: 'settlement_settlements_skipped_total',
      help: 'Settlement periods skipped because the available balance was below the minimum',
      labelNames: ['reason'],
      registers,
    }),
    stuckTransfers: new Gauge({
      name: 'settlement_stuck_transfers',
      help: 'Outgoing transfers not confirmed within TX_TIMEOUT_MS of being signed (or recorded, if unsigned)',
      registers,
      async collect() {
        this.set(await countStuckTransfers(ctx.db, txTimeoutMs).catch(() => -1));
      },
    }),
  };
}
