import type { Migration } from 'kysely';
import { rateLimitWindows } from './migrations/2026-12-02-0900-rate-limit-windows';

/**
 * `rate_limit_windows`, for a service that uses SharedRateLimiter: listed in the service's own migrations
 * (services/<name>/migrations/index.ts). Frozen and locked like a service's (deploy/migrations.lock.json): a change
 * is a new dated file in migrations/. Names sort before the services' own migrations.
 */
export const rateLimitMigrations: Record<string, Migration> = {
  '2026-12-02-0900-http-rate-limit-windows': rateLimitWindows,
};
