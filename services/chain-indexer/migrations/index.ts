import type { Migration } from 'kysely';
import * as init from './2026-11-22-0100-init';
import * as depositAddresses from './2026-11-25-1600-deposit-addresses';
import * as depositRegisteredBlock from './2026-12-02-0500-deposit-registered-block';

/** Frozen, date-prefixed migrations of the indexer schema. They never import application code. */
export const migrations: Record<string, Migration> = {
  '2026-11-22-0100-init': init,
  '2026-11-25-1600-deposit-addresses': depositAddresses,
  '2026-12-02-0500-deposit-registered-block': depositRegisteredBlock,
};
