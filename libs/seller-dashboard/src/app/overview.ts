import { formatUsdc, parseUsdc, splitFee } from '@paygate/money';
import type { Settlement, Transaction } from './types';

/**
 * The overview's figures over these payments (reversed ones left out), exact in micro-USDC: fees are Paygate's 5%
 * net of the fee returned with refunds, so gross - refunds - fees = net.
 */
export function totals(transactions: Transaction[]) {
  let gross = 0n;
  let refunds = 0n;
  let net = 0n;
  let count = 0;
  for (const t of transactions) {
    if (t.status === 'reversed') continue;
    const paid = parseUsdc(t.amount);
    const refunded = parseUsdc(t.refundedAmount);
    gross += paid;
    refunds += refunded;
    net += splitFee(paid).sellerMicro - splitFee(refunded).sellerMicro;
    count += 1;
  }
  return {
    gross: formatUsdc(gross),
    refunds: formatUsdc(refunds),
    fees: formatUsdc(gross - refunds - net),
    net: formatUsdc(net),
    count,
  };
}

/** When the current settlement period ends (UTC): daily at midnight, weekly on Monday, monthly on the 1st. */
export function nextPayoutAt(frequency: 'DAILY' | 'WEEKLY' | 'MONTHLY', now: Date): Date {
  const y = now.getUTCFullYear();
  const m = now.getUTCMonth();
  const d = now.getUTCDate();
  if (frequency === 'MONTHLY') return new Date(Date.UTC(y, m + 1, 1));
  if (frequency === 'WEEKLY') {
    const daysToMonday = (8 - now.getUTCDay()) % 7 || 7;
    return new Date(Date.UTC(y, m, d + daysToMonday));
  }
  return new Date(Date.UTC(y, m, d + 1));
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const DAY_MS = 86_400_000;

/** 2026-11-25 → "25 Nov 2026". */
export function dayLabel(date: Date): string {
  return `${date.getUTCDate()} ${MONTHS[date.getUTCMonth()]} ${date.getUTCFullYear()}`;
}

/** A settlement period as dates: "25 Nov 2026", "23–29 Nov 2026", "Nov 2026", or with times when shorter. */
export function periodLabel(period: Settlement['period']): string {
  const start = new Date(period.start);
  const end = new Date(period.end);
  if (Number.isNaN(start.getTime()) || Number.isNaN(end.getTime())) return period.key;
  const length = end.getTime() - start.getTime();
  const midnight = (date: Date) => date.getTime() % DAY_MS === 0;
  if (midnight(start) && midnight(end)) {
    if (length === DAY_MS) return dayLabel(start);
    if (start.getUTCDate() === 1 && end.getUTCDate() === 1 && length >= 28 * DAY_MS)
      return `${MONTHS[start.getUTCMonth()]} ${start.getUTCFullYear()}`;
    const last = new Date(end.getTime() - DAY_MS);
    const sameMonth = last.getUTCMonth() === start.getUTCMonth();
    return `${sameMonth ? start.getUTCDate() : `${start.getUTCDate()} ${MONTHS[start.getUTCMonth()]}`}–${dayLabel(last)}`;
  }
  const time = (date: Date) => date.toISOString().slice(11, 16);
  return `${dayLabel(start)}, ${time(start)}–${time(end)} UTC`;
}

export const CHART_DAYS = 30;

export interface SkillSeries {
  days: number[];
  /** Per skill (the largest few, then "Other skills"), micro-USDC per UTC day. */
  skills: Array<{ name: string; amounts: bigint[] }>;
  totals: bigint[];
  counts: number[];
}

/** Payments per UTC day and skill over the last `dayCount` days up to `now` (zero-filled; reversed left out). */
export function dailyBySkill(
  transactions: Transaction[],
  now: Date,
  dayCount = CHART_DAYS,
  maxSkills = 4,
): SkillSeries {
  const today = Math.floor(now.getTime() / DAY_MS);
  const first = today - dayCount + 1;
  const bySkill = new Map<string, bigint[]>();
  const totalsOf = Array.from({ length: dayCount }, () => 0n);
  const counts = Array.from({ length: dayCount }, () => 0);
  for (const t of transactions) {
    if (t.status === 'reversed') continue;
    const index = Math.floor(new Date(t.confirmedAt).getTime() / DAY_MS) - first;
    if (index < 0 || index >= dayCount) continue;
    const name = t.skillName ?? 'no skill';
    const amounts = bySkill.get(name) ?? Array.from({ length: dayCount }, () => 0n);
    amounts[index]! += parseUsdc(t.amount);
    bySkill.set(name, amounts);
    totalsOf[index]! += parseUsdc(t.amount);
    counts[index]! += 1;
  }
  const sum = (amounts: bigint[]) => amounts.reduce((a, b) => a + b, 0n);
  // Largest first: the sign of the bigint difference (Number keeps it).
  const ranked = [...bySkill.entries()].sort(([, a], [, b]) => Number(sum(b) - sum(a)));
  const skills = ranked.slice(0, maxSkills).map(([name, amounts]) => ({ name, amounts }));
  const rest = ranked.slice(maxSkills);
  if (rest.length) {
    skills.push({
      name: 'Other skills',
      amounts: totalsOf.map((_, i) => rest.reduce((total, [, amounts]) => total + amounts[i]!, 0n)),
    });
  }
  return { days: totalsOf.map((_, i) => ((first + i) * DAY_MS) / 1000), skills, totals: totalsOf, counts };
}

/** The y axis top: just above the largest day, however small (a $0.05 day fills the chart), never 0. */
export function axisTop(largestDay: number): number {
  return largestDay > 0 ? largestDay * 1.15 : 0.1;
}

/** Tick labels with as many decimals as the tick step needs ($0.01, $0.005), at least cents. */
export function tickLabel(value: number, step: number): string {
  const decimals = Math.min(6, Math.max(2, Math.ceil(-Math.log10(step > 0 ? step : 1) - 1e-9)));
  return `$${value.toFixed(decimals)}`;
}
