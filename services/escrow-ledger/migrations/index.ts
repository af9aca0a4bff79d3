import type { Migration } from 'kysely';
import { ledgerInit } from './2026-11-22-0100-ledger';
import { bookPayments } from './2026-11-22-0200-book-payments';
import { batchedPostings } from './2026-11-22-0300-batched-postings';
import { orderedLocks } from './2026-11-22-0400-ordered-locks';
import { reorgReinclusion } from './2026-11-22-0500-reorg-reinclusion';
import { unmatchedTransferRefunds } from './2026-11-22-0900-unmatched-transfer-refunds';

/** Frozen, date-prefixed migrations of the ledger schema. They never import application code. */
export const migrations: Record<string, Migration> = {
  '2026-11-22-0100-ledger': ledgerInit,
  '2026-11-22-0200-book-payments': bookPayments,
  '2026-11-22-0300-batched-postings': batchedPostings,
  '2026-11-22-0400-ordered-locks': orderedLocks,
  '2026-11-22-0500-reorg-reinclusion': reorgReinclusion,
  '2026-11-22-0900-unmatched-transfer-refunds': unmatchedTransferRefunds,
};
