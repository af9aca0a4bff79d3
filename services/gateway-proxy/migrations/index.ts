import type { Migration } from 'kysely';
import { gatewayInit } from './2026-11-22-0400-gateway-init';

/** Frozen, date-prefixed migrations of the gateway schema. They never import application code. */
export const migrations: Record<string, Migration> = {
  '2026-11-22-0400-gateway-init': gatewayInit,
};
