import type { Migration } from 'kysely';
import { init } from './2026-11-22-0100-init';
import { forwardingKey } from './2026-11-23-0100-forwarding-key';
import { sessionSignOut } from './2026-11-24-0100-session-sign-out';
import { walletGuardedChanges } from './2026-11-25-0100-wallet-guarded-changes';
import { rateLimitWindows } from './2026-11-25-0200-rate-limit-windows';
import { idempotencyClaims } from './2026-11-25-1800-idempotency-claims';
import { apiKeyDetails } from './2026-11-26-0100-api-key-details';
import { checkoutMatching } from './2026-12-02-0300-checkout-matching';
/** Frozen, date-prefixed migrations of the registry schema. They never import application code. */
export const migrations: Record<string, Migration> = {
  '2026-11-22-0100-init': init,
  '2026-11-23-0100-forwarding-key': forwardingKey,
  '2026-11-24-0100-session-sign-out': sessionSignOut,
  '2026-11-25-0100-wallet-guarded-changes': walletGuardedChanges,
  '2026-11-25-0200-rate-limit-windows': rateLimitWindows,
  '2026-11-25-1800-idempotency-claims': idempotencyClaims,
  '2026-11-26-0100-api-key-details': apiKeyDetails,
  '2026-12-02-0300-checkout-matching': checkoutMatching,
};
