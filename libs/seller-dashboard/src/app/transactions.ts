import type { Transaction } from './types';

export interface TransactionFilters {
  /** yyyy-mm-dd, inclusive, UTC */
  from?: string;
  to?: string;
  skill?: string;
  status?: string;
  txHash?: string;
}

/** Filters loaded transactions (the dashboard uses it for a partial tx hash; the API filters the rest). */
export function filterTransactions(transactions: Transaction[], filters: TransactionFilters): Transaction[] {
  const hash = filters.txHash?.trim().toLowerCase();
  return transactions.filter((t) => {
    const day = t.confirmedAt.slice(0, 10);
    if (filters.from && day < filters.from) return false;
    if (filters.to && day > filters.to) return false;
    if (filters.skill && t.skillName !== filters.skill) return false;
    if (filters.status && t.status !== filters.status) return false;
    if (hash && !t.txHash.toLowerCase().includes(hash)) return false;
    return true;
  });
}

const FULL_HASH = /^0x[0-9a-fA-F]{64}$/;

/** The query of GET /api/v1/transactions for these filters (`to` is inclusive: the API's bound is exclusive). */
export function transactionQuery(filters: TransactionFilters): Record<string, string | undefined> {
  const hash = filters.txHash?.trim();
  return {
    status: filters.status || undefined,
    skill: filters.skill || undefined,
    confirmedFrom: filters.from || undefined,
    confirmedBefore: filters.to ? nextDay(filters.to) : undefined,
    txHash: hash && FULL_HASH.test(hash) ? hash : undefined,
  };
}

/** A hash being typed (not yet whole) is matched over the rows already loaded. */
export function partialHash(hash: string | undefined): string | undefined {
  const trimmed = hash?.trim();
  return trimmed && !FULL_HASH.test(trimmed) ? trimmed : undefined;
}

function nextDay(day: string): string {
  const date = new Date(`${day}T00:00:00Z`);
  if (Number.isNaN(date.getTime())) return day;
  return new Date(date.getTime() + 86_400_000).toISOString().slice(0, 10);
}

/** For the chart's axis only (a plot needs floats); every amount shown as text stays exact. */
export function microToPlot(amount: bigint): number {
  return Number(amount) / 1_000_000;
}
