import type { Migration } from 'kysely';

/** Frozen, date-prefixed migrations of the settlement schema. They never import application code. */
export const migrations: Record<string, Migration> = {};
