import type { Transaction } from './types';

const COLUMNS: Array<[string, (t: Transaction) => string | number | null]> = [
  ['transactionId', (t) => t.transactionId],
  ['confirmedAt', (t) => t.confirmedAt],
  ['skill', (t) => t.skillName],
  ['status', (t) => t.status],
  ['amount', (t) => t.amount],
  ['sellerAmount', (t) => t.sellerAmount],
  ['platformFee', (t) => t.platformFee],
  ['refundedAmount', (t) => t.refundedAmount],
  // A paid call whose seller failed: `failed_retryable` until retryUntil, then `failed` (unless a retry served it).
  ['callStatus', (t) => t.callStatus ?? 'served'],
  ['callFailedAt', (t) => t.callFailedAt ?? null],
  ['retryUntil', (t) => t.retryUntil ?? null],
  ['payer', (t) => t.payer],
  ['source', (t) => t.source],
  ['network', (t) => t.network],
  ['txHash', (t) => t.txHash],
  ['settlementId', (t) => t.settlementId],
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
