import { Counter, Gauge, type ServiceMetrics } from '@paygate/runtime';

export interface LedgerMetrics {
  conflicts: Counter<'kind'>;
  reconciliationDifferences: Gauge;
  holdsReleased: Counter;
  refundsBooked: Counter<'phase'>;
  unconfirmedOverdue: Gauge;
}

export function createLedgerMetrics(metrics: ServiceMetrics): LedgerMetrics {
  const registers = [metrics.registry];
  return {
    conflicts: new Counter({
      name: 'ledger_payment_conflicts_total',
      help: 'Payments the ledger refused to credit and surfaced to an operator',
      labelNames: ['kind'],
      registers,
    }),
    reconciliationDifferences: new Gauge({
      name: 'ledger_reconciliation_differences',
      help: 'Differences found by the last reconciliation (escrow account vs chain, trial balance, drift); 0 = reconciled',
      registers,
    }),
    holdsReleased: new Counter({ name: 'ledger_holds_released_total', help: 'Holds released', registers }),
    refundsBooked: new Counter({
      name: 'ledger_refunds_booked_total',
      help: 'Refunds booked, by phase',
      labelNames: ['phase'],
      registers,
    }),
    unconfirmedOverdue: new Gauge({
      name: 'ledger_transfers_unconfirmed_overdue',
      help: 'Transfers booked from payment.confirmed that the chain has not confirmed within CHAIN_CONFIRM_TIMEOUT_MS (their holds stay held); 0 = none',
      registers,
    }),
  };
}
