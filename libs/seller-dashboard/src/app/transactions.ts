import { dateTime } from './format';
import type { Transaction } from './types';

export interface TransactionFilters {
  /** yyyy-mm-dd, inclusive, UTC */
  from?: string;
  to?: string;
  skill?: string;
  status?: string;
  txHash?: string;
}

/** The transactions whose tx hash holds this partial one (the API filters by a whole hash only). */
export function matchHash(transactions: Transaction[], hash: string | undefined): Transaction[] {
  const part = hash?.trim().toLowerCase();
  return part ? transactions.filter((t) => t.txHash.toLowerCase().includes(part)) : transactions;
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

type CallFacts = Pick<
  Transaction,
  'callStatus' | 'callFailedAt' | 'upstreamOutcome' | 'upstreamStatus' | 'retryUntil' | 'callRecoveredAt'
>;

const FAILURE_WORDS = {
  timeout: 'timed out',
  unreachable: 'unreachable',
  misconfigured: 'API URL not valid',
};

/** How the seller failed the call, in words: "HTTP 502", "timed out", … */
function sellerFailureWords(t: CallFacts): string {
  if (t.upstreamOutcome === 'error_status') return `HTTP ${t.upstreamStatus}`;
  return (t.upstreamOutcome && FAILURE_WORDS[t.upstreamOutcome]) || 'failed';
}

/** A time of the retry window: "14:05 UTC" today, with its date on another day. */
function windowTime(iso: string, now: Date): string {
  const time = new Date(iso).toISOString();
  const clock = `${time.slice(11, 16)} UTC`;
  return time.slice(0, 10) === now.toISOString().slice(0, 10) ? clock : `${time.slice(0, 10)} ${clock}`;
}

/** The seller failed the call and the buyer may still retry (judged against `now`: a page may stay open). */
function retryWindowOpen(t: CallFacts, now: Date): boolean {
  return (
    t.callStatus === 'failed_retryable' && Boolean(t.retryUntil) && Date.parse(t.retryUntil!) > now.getTime()
  );
}

/** The label of a payment whose seller failed the call, or undefined when it was served at once. */
export function callOutcomeLabel(t: CallFacts, now: Date): string | undefined {
  if (!t.callStatus || !t.callFailedAt) return undefined;
  if (t.callStatus === 'served') return 'Seller failed, served on retry';
  if (retryWindowOpen(t, now)) {
    return `Seller failed, buyer may retry until ${windowTime(t.retryUntil!, now)}`;
  }
  // Past the window with no attempt served, the ledger refunds the buyer (the transaction's status says when).
  return 'Seller failed, not served: refunded to the buyer';
}

/** The detail view's sentence: how and when the seller failed, and what became of the buyer's retry window. */
export function callOutcomeDetail(t: CallFacts, now: Date): string | undefined {
  if (!t.callFailedAt) return undefined;
  const failed = `Your API ${sellerFailureWords(t)} at ${dateTime(t.callFailedAt)}`;
  if (t.callStatus === 'served')
    return `${failed}; the buyer's retry was served at ${dateTime(t.callRecoveredAt)}.`;
  if (retryWindowOpen(t, now)) {
    return `${failed}; the buyer may call again with the same payment until ${dateTime(t.retryUntil)}.`;
  }
  return `${failed}; no retry was served before the window closed at ${dateTime(t.retryUntil)}, so the payment is refunded to the buyer from escrow.`;
}
