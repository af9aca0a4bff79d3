import type { Migration } from 'kysely';
import { outboxInbox } from './migrations/2026-12-02-0900-outbox-inbox';
import { reorgTombstones } from './migrations/2026-12-02-0900-reorg-tombstones';

/**
 * The tables the bus's code owns, as migrations a service lists in its own (services/<name>/migrations/index.ts).
 * Frozen and locked like a service's (deploy/migrations.lock.json): a change is a new dated file in migrations/.
 * Names sort before the services' own migrations.
 */

/** `outbox` and `inbox`, in every service's schema. */
export const busMigrations: Record<string, Migration> = {
  '2026-12-02-0900-bus-outbox-inbox': outboxInbox,
};

/** `reorg_tombstones`, for a service that calls leaveReorgTombstone / takeReorgTombstone. */
export const reorgTombstoneMigrations: Record<string, Migration> = {
  '2026-12-02-0900-bus-reorg-tombstones': reorgTombstones,
};
