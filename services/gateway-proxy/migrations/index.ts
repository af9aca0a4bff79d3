import type { Migration } from 'kysely';
import { gatewayInit } from './2026-11-22-0400-gateway-init';
import { x402Authorizations } from './2026-11-22-1100-x402-authorizations';
import { rateLimitWindowLength } from './2026-11-25-0100-rate-limit-window-length';
import { ticketKeysSealed } from './2026-11-25-0200-ticket-keys-sealed';
import { claimedVia } from './2026-11-26-1700-claimed-via';
import { x402PaymentIds } from './2026-12-02-0600-x402-payment-ids';
import { unservedClaims } from './2026-12-02-0730-unserved-claims';
import { blockedPayers } from './2026-12-02-0740-blocked-payers';
import { siwxNonces } from './2026-12-02-0800-siwx-nonces';

/** Frozen, date-prefixed migrations of the gateway schema. They never import application code. */
export const migrations: Record<string, Migration> = {
  '2026-11-22-0400-gateway-init': gatewayInit,
  '2026-11-22-1100-x402-authorizations': x402Authorizations,
  '2026-11-25-0100-rate-limit-window-length': rateLimitWindowLength,
  '2026-11-25-0200-ticket-keys-sealed': ticketKeysSealed,
  '2026-11-26-1700-claimed-via': claimedVia,
  '2026-12-02-0600-x402-payment-ids': x402PaymentIds,
  '2026-12-02-0730-unserved-claims': unservedClaims,
  '2026-12-02-0740-blocked-payers': blockedPayers,
  '2026-12-02-0800-siwx-nonces': siwxNonces,
};
