import { Counter, Gauge, type ServiceContext } from '@paygate/runtime';
import type { SettlementDB } from './db';
import { countStuckTransfers } from './transfers/repository';

export interface SettlementMetrics {
  /** Counts a transfer confirmed on chain (money that actually left escrow). */
  transferSent(kind: 'payout' | 'refund' | 'platform_payout'): void;
  transfersFailed: Counter<'kind'>;
  transfersRevertedAfterConfirmation: Counter<'kind'>;
  transfersDroppedAfterFinal: Counter<'kind'>;
  transfersRefused: Counter<'kind' | 'reason'>;
  settlementsSkipped: Counter<'reason'>;
  stuckTransfers: Gauge;
}

export function createSettlementMetrics(
  ctx: ServiceContext<SettlementDB>,
  txTimeoutMs: number,
): SettlementMetrics {
  const registers = [ctx.metrics.registry];
  const counter = <L extends string = never>(name: string, help: string, labelNames: L[] = []) =>
    new Counter<L>({ name, help, labelNames, registers });
  const byKind = (name: string, help: string) => counter(name, `${help}, by kind`, ['kind']);
  const transfersSent = byKind(
    'settlement_transfers_sent_total',
    'Outgoing USDC transfers confirmed on chain',
  );
  const payoutsSent = counter('settlement_payouts_sent_total', 'Seller payouts confirmed on chain');
  const refundsSent = counter('settlement_refunds_sent_total', 'Refund transfers confirmed on chain');
  return {
    transferSent(kind) {
      transfersSent.inc({ kind });
      if (kind === 'payout') payoutsSent.inc();
      else if (kind === 'refund') refundsSent.inc();
    },
    transfersRefused: counter(
      'settlement_transfers_refused_total',
      'Transfers out of escrow refused before signing (not authorised by the ledger, or above MAX_TRANSFER_USDC), by kind and reason',
      ['kind', 'reason'],
    ),
    transfersFailed: byKind(
      'settlement_transfers_failed_total',
      'Outgoing transfers that reverted or could not be sent',
    ),
    transfersRevertedAfterConfirmation: byKind(
      'settlement_transfers_reverted_after_confirmation_total',
      'Transfers reported confirmed, dropped by a reorg and then mined reverted (no money left escrow)',
    ),
    transfersDroppedAfterFinal: byKind(
      'settlement_transfers_dropped_after_final_total',
      'Transfers final (2 x CONFIRMATIONS deep) that a deeper reorg dropped and the same signed bytes were watched and sent again',
    ),
    settlementsSkipped: counter(
      'settlement_settlements_skipped_total',
      'Settlement periods skipped because the available balance was below the minimum',
      ['reason'],
    ),
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
