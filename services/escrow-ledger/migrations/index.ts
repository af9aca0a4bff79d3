import { busMigrations, reorgTombstoneMigrations } from '@paygate/bus';
import { rateLimitMigrations } from '@paygate/http';
import type { Migration } from 'kysely';
import { baseline } from './2026-12-02-1000-baseline';
import { cheaperBookingChecks } from './2026-12-03-1300-cheaper-booking-checks';

/**
 * The ledger schema's migrations: the tables of the libraries it uses (the bus's outbox, inbox and reorg
 * tombstones, the shared rate limiter's windows), then its own. Frozen, date-prefixed; a change is a new file dated
 * after the last. They never import application code. Functions and views: sql/ledger.sql.
 */
export const migrations: Record<string, Migration> = {
  ...busMigrations,
  ...reorgTombstoneMigrations,
  ...rateLimitMigrations,
  '2026-12-02-1000-baseline': baseline,
  '2026-12-03-1300-cheaper-booking-checks': cheaperBookingChecks,
};
