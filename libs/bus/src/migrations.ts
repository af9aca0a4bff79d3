import type { Migration } from 'kysely';
import { outboxInbox } from './migrations/2026-12-02-0900-outbox-inbox';
import { reorgTombstones } from './migrations/2026-12-02-0900-reorg-tombstones';

/**
 * The bus's tables, as migrations a service lists in its own; frozen and locked like a service's (a change is a
 * new dated file), named to sort before the services' own.
 */

/** `outbox` and `inbox`, in every service's schema. */
export const busMigrations: Record<string, Migration> = {
  '2026-12-02-0900-bus-outbox-inbox': outboxInbox,
};

/** `reorg_tombstones`, for a service that calls leaveReorgTombstone / takeReorgTombstone. */
export const reorgTombstoneMigrations: Record<string, Migration> = {
  '2026-12-02-0900-bus-reorg-tombstones': reorgTombstones,
};
