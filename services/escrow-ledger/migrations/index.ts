import type { Migration } from 'kysely';
import { ledgerInit } from './2026-11-22-0100-ledger';

/** Frozen, date-prefixed migrations of the ledger schema. They never import application code. */
export const migrations: Record<string, Migration> = {
  '2026-11-22-0100-ledger': ledgerInit,
};
