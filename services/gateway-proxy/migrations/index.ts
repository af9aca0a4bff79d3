import { busMigrations } from '@paygate/bus';
import { rateLimitMigrations } from '@paygate/http';
import type { Migration } from 'kysely';
import { baseline } from './2026-12-02-1000-baseline';
import { ticketKeysSealedOnly } from './2026-12-02-1400-ticket-keys-sealed-only';
import { paymentClaimsInFlight } from './2026-12-02-1500-payment-claims-in-flight';
import { paymentClaimsRetryCause } from './2026-12-02-1600-payment-claims-retry-cause';

/**
 * The gateway schema's migrations: the tables of the libraries it uses (the bus's outbox and inbox, the shared rate
 * limiter's windows: request limits and the relayer's per-day budgets), then its own. Frozen, date-prefixed; a
 * change is a new file dated after the last. They never import application code.
 */
export const migrations: Record<string, Migration> = {
  ...busMigrations,
  ...rateLimitMigrations,
  '2026-12-02-1000-baseline': baseline,
  '2026-12-02-1400-ticket-keys-sealed-only': ticketKeysSealedOnly,
  '2026-12-02-1500-payment-claims-in-flight': paymentClaimsInFlight,
  '2026-12-02-1600-payment-claims-retry-cause': paymentClaimsRetryCause,
};
