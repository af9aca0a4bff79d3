import type { Transaction } from './types';

type Column = [string, (t: Transaction) => string | number | null | undefined];

/** Columns named and valued as the transaction's own fields. */
const fields = (...names: Array<keyof Transaction>) =>
  names.map((name): Column => [name, (t) => t[name] as string | number | null | undefined]);

const COLUMNS: Column[] = [
  ...fields('transactionId', 'confirmedAt'),
  ['skill', (t) => t.skillName],
  ...fields('status', 'amount', 'sellerAmount', 'platformFee', 'refundedAmount'),
  // A paid call whose seller failed: `failed_retryable` until retryUntil, then `failed` (unless a retry served it).
  ['callStatus', (t) => t.callStatus ?? 'served'],
  ...fields('callFailedAt', 'retryUntil', 'payer', 'source', 'network', 'txHash', 'settlementId'),
];

/** RFC 4180 field; a leading = + - @ is prefixed with ' so a spreadsheet never runs it as a formula. */
export function csvField(value: string | number | null | undefined): string {
  let text = value === null || value === undefined ? '' : String(value);
  if (/^[=+\-@\t\r]/.test(text) && !/^-?\d+(\.\d+)?$/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export function transactionsCsv(transactions: Transaction[]): string {
  const lines = [COLUMNS.map(([name]) => name).join(',')];
  for (const t of transactions) lines.push(COLUMNS.map(([, get]) => csvField(get(t))).join(','));
  return `${lines.join('\r\n')}\r\n`;
}
