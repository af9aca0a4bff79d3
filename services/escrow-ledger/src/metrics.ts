import { Counter, Gauge, type ServiceMetrics } from '@paygate/runtime';

export type LedgerMetrics = ReturnType<typeof createLedgerMetrics>;

export function createLedgerMetrics(metrics: ServiceMetrics) {
  const registers = [metrics.registry];
  const gauge = (name: string, help: string) => new Gauge({ name, help, registers });
  const counter = <L extends string>(name: string, help: string, labelNames: readonly L[] = []) =>
    new Counter<L>({ name, help, labelNames, registers });
  return {
    conflicts: counter(
      'ledger_payment_conflicts_total',
      'Payments the ledger refused to credit and surfaced to an operator',
      ['kind'] as const,
    ),
    reconciliationDifferences: gauge(
      'ledger_reconciliation_differences',
      'Differences found by the last reconciliation (escrow account vs chain, trial balance, drift); 0 = reconciled',
    ),
    holdsReleased: counter('ledger_holds_released_total', 'Holds released'),
    holdsDueOldest: new Gauge({
      name: 'ledger_holds_due_oldest_seconds',
      help: 'Seconds the oldest hold past its hold period is still held (no pending refund request), by what it waits for: release (its transfer is confirmed; alert above RELEASE_BOUND_MS) or chain (its transfer awaits CONFIRMATIONS)',
      labelNames: ['waiting'] as const,
      registers,
    }),
    refundsBooked: counter('ledger_refunds_booked_total', 'Refunds booked, by phase', ['phase'] as const),
    unconfirmedOverdue: gauge(
      'ledger_transfers_unconfirmed_overdue',
      'Transfers booked from payment.confirmed that the chain has not confirmed within CHAIN_CONFIRM_TIMEOUT_MS (their holds stay held); 0 = none',
    ),
    // Set by each reconciliation (the periodic one and the operator's): what the alerts and the dashboard read.
    reconciliation: {
      lastSuccess: gauge(
        'ledger_reconciliation_last_success_timestamp_seconds',
        'When the last reconciliation that could read the chain finished (Unix time)',
      ),
      escrowChainBalance: gauge(
        'ledger_escrow_chain_balance_micro_usdc',
        'USDC on chain in the escrow wallets (and session deposit addresses) at the last reconciliation',
      ),
      escrowLedgerBalance: gauge(
        'ledger_escrow_ledger_balance_micro_usdc',
        'The escrow_asset account (what the ledger says the escrow wallets hold) at the last reconciliation',
      ),
      sellersOwed: gauge(
        'ledger_sellers_owed_micro_usdc',
        'What sellers owe (available balances below zero, refunds beyond what was available) at the last reconciliation',
      ),
      sellersUncovered: gauge(
        'ledger_sellers_uncovered_micro_usdc',
        "Seller debts no money of theirs covers (held + available below zero), paid with other sellers' escrow",
      ),
      payersOwed: gauge(
        'ledger_payers_owed_micro_usdc',
        'What payers owe back (refunds of unmatched transfers a reorg then dropped) at the last reconciliation',
      ),
    },
  };
}
