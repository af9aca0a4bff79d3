import { busMigrations } from '@paygate/bus';
import type { Migration } from 'kysely';
import { baseline } from './2026-12-02-1000-baseline';

/**
 * The indexer schema's migrations: the tables of the libraries it uses (the bus's outbox and inbox), then its own.
 * Frozen, date-prefixed; a change is a new file dated after the last. They never import application code.
 */
export const migrations: Record<string, Migration> = {
  ...busMigrations,
  '2026-12-02-1000-baseline': baseline,
};
