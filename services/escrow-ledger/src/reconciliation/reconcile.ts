import { requestRpc } from '@paygate/bus';
import { makeProvider, usdcAbi } from '@paygate/chain';
import { formatUsdc, parseChainUsdc } from '@paygate/money';
import { PollingLoop } from '@paygate/runtime';
import type { Logger } from '@paygate/telemetry';
import type { Static } from '@sinclair/typebox';
import { Contract } from 'ethers';
import { sql } from 'kysely';
import type { EscrowLedgerConfig } from '../config';
import type { LedgerDb, Row } from '../db';
import type { LedgerContext, LedgerDeps } from '../deps';
import type { LedgerMetrics } from '../metrics';
import type { ReconciliationReport as ReportSchema } from '../operator/schemas';

type ReconciliationReport = Static<typeof ReportSchema>;
type ReconciliationDifference = ReconciliationReport['differences'][number];

/** The wallets whose USDC the escrow_asset account holds: the escrow, and the checkout deposit wallet if set. */
export function escrowWallets(
  config: Pick<EscrowLedgerConfig, 'escrowAddress' | 'checkoutEscrowAddress'>,
): string[] {
  const wallets = [config.escrowAddress];
  const checkout = config.checkoutEscrowAddress;
  if (checkout && checkout.toLowerCase() !== config.escrowAddress.toLowerCase()) wallets.push(checkout);
  return wallets;
}

/** Session deposit addresses that may hold booked USDC, as settlement (which sweeps them) lists them. */
export type DepositHoldings = () => Promise<{ addresses: string[]; truncated: boolean }>;

/** Deposit addresses read per reconciliation at most (the RPC's bound). */
export const MAX_DEPOSIT_ADDRESSES = 10_000;
const BALANCE_READS_AT_ONCE = 20;

/** Whether the ledger booked any transfer to an address other than the fixed escrow wallets (a deposit address). */
async function bookedDepositTransfers(db: LedgerDb, config: EscrowLedgerConfig): Promise<boolean> {
  const wallets = escrowWallets(config).map((w) => w.toLowerCase());
  const row = await sql<{ found: boolean }>`select exists (
      select 1 from transfers where to_address is not null and not (to_address = any(${wallets}::text[]))
    ) as found`.execute(db);
  return row.rows[0]?.found ?? false;
}

/** The USDC balance on chain of every escrow wallet together, in micro-USDC (bounded by the RPC timeout). */
async function chainEscrowBalance(config: EscrowLedgerConfig, depositAddresses: string[]): Promise<bigint> {
  const provider = makeProvider(config.rpcUrl, { timeoutMs: config.rpcTimeoutMs, chainId: config.chainId });
  try {
    const usdc = new Contract(config.usdcAddress, usdcAbi, provider);
    const addresses = [...escrowWallets(config), ...depositAddresses];
    let total = 0n;
    for (let i = 0; i < addresses.length; i += BALANCE_READS_AT_ONCE) {
      const balances = await Promise.all(
        addresses
          .slice(i, i + BALANCE_READS_AT_ONCE)
          .map((wallet) => usdc.getFunction('balanceOf')(wallet) as Promise<bigint>),
      );
      total = balances.reduce((sum, balance) => sum + balance, total);
    }
    return total;
  } finally {
    provider.destroy();
  }
}

/** The deposit addresses whose balances count as escrow money (asked only if any was booked to), and what was missed. */
async function depositAddressesToRead(
  db: LedgerDb,
  config: EscrowLedgerConfig,
  chainBalance: bigint | undefined,
  depositHoldings: DepositHoldings | undefined,
): Promise<{ deposits: string[]; differences: ReconciliationDifference[] }> {
  if (chainBalance !== undefined || !(await bookedDepositTransfers(db, config))) {
    return { deposits: [], differences: [] };
  }
  if (!depositHoldings) {
    const check = 'session deposit addresses (no way to ask settlement which hold money)';
    return {
      deposits: [],
      differences: [{ check, expected: 'listed', actual: 'unknown', difference: 'unknown' }],
    };
  }
  const { addresses: deposits, truncated } = await depositHoldings();
  if (!truncated) return { deposits, differences: [] };
  const check = `session deposit addresses holding money (more than the ${MAX_DEPOSIT_ADDRESSES} read)`;
  const actual = `${deposits.length} read`;
  return { deposits, differences: [{ check, expected: 'all read', actual, difference: 'unknown' }] };
}

/** A difference between two amounts: `expected` - `actual`. */
function amountsDiffer(check: string, expected: bigint, actual: bigint): ReconciliationDifference {
  const amounts = { expected: formatUsdc(expected), actual: formatUsdc(actual) };
  return { check, ...amounts, difference: formatUsdc(expected - actual) };
}

/** Per account kind its balance, the trial balance's totals, and `ledger`: the escrow_asset balance. */
async function accountTotals(db: LedgerDb) {
  const totals = await sql<
    Row<'accounts', 'kind' | 'normal_side'> & { balance: bigint }
  >`select kind, normal_side, sum(balance_micro)::bigint as balance from accounts group by kind, normal_side
      order by kind`.execute(db);
  const accounts: Record<string, string> = {};
  let debits = 0n;
  let credits = 0n;
  let ledger = 0n;
  for (const row of totals.rows) {
    accounts[row.kind] = formatUsdc(row.balance);
    if (row.normal_side === 'debit') debits += row.balance;
    else credits += row.balance;
    if (row.kind === 'escrow_asset') ledger = row.balance;
  }
  return { accounts, debits, credits, ledger };
}

async function balanceDriftDifferences(db: LedgerDb): Promise<ReconciliationDifference[]> {
  const drift = await db
    .selectFrom('account_balance_drift')
    .select(['kind', 'owner', 'balance_micro', 'postings_balance_micro'])
    .execute();
  return drift.map((row) => {
    const check = `account ${row.kind}${row.owner ? `:${row.owner}` : ''} balance vs its postings`;
    // A sum of bigints is a numeric, which pg hands over as a string.
    return amountsDiffer(check, BigInt(row.postings_balance_micro), row.balance_micro);
  });
}

/**
 * What sellers owe (available below zero), what of it no money of theirs covers, the credit granted, and what payers
 * owe (refund_receivable: not a difference, escrow_asset is at the chain, but escrow holds that less).
 */
async function exposureOf(db: LedgerDb) {
  const totals = await sql<Record<'owed' | 'uncovered' | 'credit' | 'payers', bigint | null>>`
      with sellers as (
        select owner, sum(balance_micro) filter (where kind = 'seller_available') as available,
          sum(balance_micro) as total
        from accounts where kind in ('seller_held', 'seller_available') group by owner)
      select sum(greatest(-available, 0))::bigint as owed, sum(greatest(-total, 0))::bigint as uncovered,
        (select sum(credit_limit_micro) from seller_credit_limits)::bigint as credit,
        (select sum(balance_micro) from accounts where kind = 'refund_receivable')::bigint as payers
      from sellers`.execute(db);
  const row = totals.rows[0];
  const micro = (key: 'owed' | 'uncovered' | 'credit' | 'payers') => BigInt(row?.[key] ?? 0n);
  return {
    owed: micro('owed'),
    uncovered: micro('uncovered'),
    credit: micro('credit'),
    payers: micro('payers'),
  };
}

/** Every difference between the ledger and the chain, and within the ledger; none: the books are right. */
export async function reconcile(
  db: LedgerDb,
  config: EscrowLedgerConfig,
  chainBalance?: bigint,
  depositHoldings?: DepositHoldings,
): Promise<ReconciliationReport> {
  // Money at session deposit addresses is escrow money not swept yet: counted on chain where it sits.
  const depositRead = await depositAddressesToRead(db, config, chainBalance, depositHoldings);
  const onChain = chainBalance ?? (await chainEscrowBalance(config, depositRead.deposits));
  const totals = await accountTotals(db);
  const differences = depositRead.differences;
  if (onChain !== totals.ledger) {
    const check = 'escrow_asset vs on-chain USDC balance of the escrow wallets and session deposit addresses';
    differences.push(amountsDiffer(check, onChain, totals.ledger));
  }
  if (totals.debits !== totals.credits) {
    const check = 'trial balance (debit-normal vs credit-normal accounts)';
    differences.push(amountsDiffer(check, totals.debits, totals.credits));
  }
  differences.push(...(await balanceDriftDifferences(db)));
  const exposure = await exposureOf(db);
  // Escrow is shared: a seller whose held + available is below zero is being paid for by other sellers' money.
  if (exposure.uncovered > 0n) {
    const check = "seller balances (held + available) below zero, paid with other sellers' money in escrow";
    const uncovered = formatUsdc(exposure.uncovered);
    differences.push({ check, expected: '0', actual: uncovered, difference: uncovered });
  }
  return {
    balanced: differences.length === 0,
    escrowAddress: config.escrowAddress,
    wallets: escrowWallets(config),
    chainBalance: formatUsdc(onChain),
    ledgerBalance: formatUsdc(totals.ledger),
    difference: formatUsdc(onChain - totals.ledger),
    differences,
    accounts: totals.accounts,
    exposure: {
      owedBySellers: formatUsdc(exposure.owed),
      uncovered: formatUsdc(exposure.uncovered),
      creditGranted: formatUsdc(exposure.credit),
      owedByPayers: formatUsdc(exposure.payers),
    },
    checkedAt: new Date().toISOString(),
  };
}

/** reconcile with the deposit addresses settlement lists (the periodic pass and the operator's route). */
export function reconcileWithSettlement(ctx: LedgerContext, deps: LedgerDeps): Promise<ReconciliationReport> {
  return reconcile(ctx.db, deps.config, undefined, () =>
    requestRpc(
      ctx.bus,
      'settlement.deposit_holdings',
      { limit: MAX_DEPOSIT_ADDRESSES },
      { timeoutMs: deps.config.rpcTimeoutMs },
    ),
  );
}

/** A report's amount as a gauge in micro-USDC (a float, exact below 2^53), read without the API's maximum: never throws. */
function gaugeMicro(amount: string): number {
  return amount.startsWith('-') ? -Number(parseChainUsdc(amount.slice(1))) : Number(parseChainUsdc(amount));
}

/** A difference raises the metric (number of differences, 0 when reconciled) and an error log line. */
export function recordReconciliation(
  deps: { metrics: LedgerMetrics },
  ctx: { logger: Logger },
  report: ReconciliationReport,
): void {
  deps.metrics.reconciliationDifferences.set(report.differences.length);
  const gauges = deps.metrics.reconciliation;
  gauges.lastSuccess.set(Date.parse(report.checkedAt) / 1000);
  gauges.escrowChainBalance.set(gaugeMicro(report.chainBalance));
  gauges.escrowLedgerBalance.set(gaugeMicro(report.ledgerBalance));
  gauges.sellersOwed.set(gaugeMicro(report.exposure.owedBySellers));
  gauges.sellersUncovered.set(gaugeMicro(report.exposure.uncovered));
  gauges.payersOwed.set(gaugeMicro(report.exposure.owedByPayers));
  if (report.balanced) {
    ctx.logger.info({ ledgerBalance: report.ledgerBalance }, 'reconciliation: ledger matches the chain');
  } else {
    ctx.logger.error(
      {
        differences: report.differences,
        chainBalance: report.chainBalance,
        ledgerBalance: report.ledgerBalance,
      },
      'reconciliation: ledger and chain differ',
    );
  }
}

/**
 * The operator route's reconciliation every RECONCILE_INTERVAL_MS on each replica, for the alerts' gauges. A chain or
 * settlement that does not answer fails the pass, leaving the last-success gauge that the staleness alert watches.
 */
export function reconciliationWatch(ctx: LedgerContext, deps: LedgerDeps): PollingLoop {
  const intervalMs = deps.config.reconcileIntervalMs;
  return new PollingLoop(
    async () => {
      recordReconciliation(deps, ctx, await reconcileWithSettlement(ctx, deps));
    },
    {
      what: 'periodic reconciliation',
      logger: ctx.logger,
      intervalMs,
      // Not at start-up, with every replica at once after a rollout: one interval in.
      firstDelayMs: intervalMs,
      maxBackoffMs: 4 * intervalMs,
    },
  );
}
