/**
 * What must hold once the faults stop and the system drained, checked through the public API (reconciliation),
 * the chain (logs and receipts of the final chain) and read-only SQL on each service's schema: a flat list of
 * named checks (the numbers are docs/reliability.md's), each giving a count of violations (0 passes) and a few
 * examples.
 */
import pg from 'pg';
import { pendingWork } from './drain';
import type { InvariantCheck, InvariantInputs, InvariantReading } from './invariant-check';
import {
  everyOutboxEventReachedEachConsumerOnce,
  everyWebhookEventWasDelivered,
} from './invariants-delivery';
import { everyTransferInIsCreditedOnce } from './invariants-inflows';
import {
  aReconnectingWidgetSeesEveryMinedPaymentPaid,
  checkoutSessionsRanInTheirSellersMode,
  everyRefundHasOneMinedTransfer,
  everyServedCallHasOneLedgerPayment,
  everySettlementHasOneMinedPayout,
} from './invariants-outcomes';
import {
  escrowAssetHoldsEachTransferInWhileOnChain,
  everyDepositAddressHoldingUsdcIsCounted,
  everyTransferOutIsOneLedgerDebit,
} from './invariants-outflows';
import { everyPaidCallIsServedOrRefunded } from './invariants-unserved';

export interface InvariantResult {
  name: string;
  checked: number;
  violations: number;
  examples: string[];
}

interface Reconciliation {
  balanced?: boolean;
  difference?: string;
  exposure?: { owedBySellers?: string; uncovered?: string; owedByPayers?: string };
}

function readReconciliation(run: InvariantInputs): Promise<Reconciliation> {
  return fetch(`${run.baseUrl}/api/v1/reconciliation`, {
    headers: { authorization: `Bearer ${run.operatorToken}` },
    signal: AbortSignal.timeout(30_000),
  }).then((r) => r.json()) as Promise<Reconciliation>;
}

/** Invariant 1: reconciliation (the operator's API): the ledger's escrow account equals the chain, no exposure. */
async function reconciliationIsBalanced(run: InvariantInputs): Promise<InvariantReading> {
  const reconciliation = await readReconciliation(run);
  return {
    name: 'reconciliation: balanced, difference 0',
    checked: 1,
    problems:
      reconciliation.balanced === true && reconciliation.difference === '0'
        ? []
        : // Whole: which check differs, and by how much, is the post-mortem's starting point.
          [JSON.stringify(reconciliation)],
  };
}

/**
 * Invariant 1b: nothing owed to the shared escrow: no seller's available balance below zero (a refund or a reversal
 * after its money was released), none uncovered, no payer owing a refund a reorg left without its transfer. The
 * run's reorgs (depth 1-3) stay below CONFIRMATIONS (4), so nothing released is ever taken back: any debt is a defect.
 */
async function nothingIsOwed(run: InvariantInputs): Promise<InvariantReading> {
  const exposure = (await readReconciliation(run)).exposure;
  const owed = Object.entries({
    owedBySellers: exposure?.owedBySellers,
    uncovered: exposure?.uncovered,
    owedByPayers: exposure?.owedByPayers,
  }).filter(([, amount]) => amount !== '0');
  return {
    name: 'nothing owed: exposure owed by sellers, uncovered and owed by payers 0',
    checked: 3,
    problems: owed.map(([what, amount]) => `${what} ${amount ?? 'missing'}`),
  };
}

/** Invariant 2: double entry: the postings sum to zero (one asset, USDC). */
async function ledgerPostingsSumToZero({ client }: InvariantInputs): Promise<InvariantReading> {
  const sum = await client.query(
    `select coalesce(sum(case side when 'debit' then amount_micro else -amount_micro end), 0)::text as s, count(*)::int as n from ledger.postings`,
  );
  return {
    name: 'ledger postings sum to zero',
    checked: sum.rows[0].n,
    problems: sum.rows[0].s === '0' ? [] : [`sum ${sum.rows[0].s}`],
  };
}

/** Invariant 10: nothing pending after the drain. */
async function nothingIsPendingAfterTheDrain({ client }: InvariantInputs): Promise<InvariantReading> {
  const pending = await pendingWork(client);
  return {
    name: 'nothing accepted is still pending after the drain',
    checked: Object.keys(pending).length,
    problems: Object.entries(pending)
      .filter(([, n]) => n > 0)
      .map(([what, n]) => `${what}: ${n}`),
  };
}

/** Every invariant, in the order of the report. */
const INVARIANTS: InvariantCheck[] = [
  reconciliationIsBalanced, // 1
  nothingIsOwed, // 1b
  ledgerPostingsSumToZero, // 2
  everyTransferInIsCreditedOnce, // 3
  everyTransferOutIsOneLedgerDebit, // 3b
  everyDepositAddressHoldingUsdcIsCounted, // 3c
  escrowAssetHoldsEachTransferInWhileOnChain, // 3d
  everyServedCallHasOneLedgerPayment, // 4
  everySettlementHasOneMinedPayout, // 5
  everyRefundHasOneMinedTransfer, // 6
  everyOutboxEventReachedEachConsumerOnce, // 7
  everyWebhookEventWasDelivered, // 8
  aReconnectingWidgetSeesEveryMinedPaymentPaid, // 9
  checkoutSessionsRanInTheirSellersMode, // 9b
  nothingIsPendingAfterTheDrain, // 10
  everyPaidCallIsServedOrRefunded, // 12
];

/** Reads every invariant, one after the other, on one read-only connection to the run's Postgres. */
export async function checkInvariants(
  options: Omit<InvariantInputs, 'client'> & { databaseUrl: string },
): Promise<InvariantResult[]> {
  const client = new pg.Client({ connectionString: options.databaseUrl });
  await client.connect();
  const results: InvariantResult[] = [];
  try {
    await client.query('set default_transaction_read_only = on');
    for (const check of INVARIANTS) {
      const { name, checked, problems } = await check({ ...options, client });
      results.push({ name, checked, violations: problems.length, examples: problems.slice(0, 5) });
    }
  } finally {
    await client.end().catch(() => undefined);
  }
  return results;
}
