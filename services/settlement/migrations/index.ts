import type { Migration } from 'kysely';
import { settlementInit } from './2026-11-22-0600-settlement-init';

/** Frozen, date-prefixed migrations of the settlement schema. They never import application code. */
export const migrations: Record<string, Migration> = {
  '2026-11-22-0600-settlement-init': settlementInit,
};
