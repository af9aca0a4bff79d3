import type { Migration } from 'kysely';

/** Frozen, date-prefixed migrations of the checkout schema. They never import application code. */
export const migrations: Record<string, Migration> = {};
