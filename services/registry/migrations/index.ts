import type { Migration } from 'kysely';

/** Frozen, date-prefixed migrations of the registry schema. They never import application code. */
export const migrations: Record<string, Migration> = {};
