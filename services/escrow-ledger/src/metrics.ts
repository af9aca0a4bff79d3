import { Counter, Gauge, type ServiceMetrics } from '@paygate/runtime';

export interface LedgerMetrics {
  conflicts: Counter<'kind'>;
  reconciliationDifferences: Gauge;
  holdsReleased: Counter;
  refundsBooked: Counter<'phase'>;
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
  };
}
