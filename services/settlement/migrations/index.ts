import type { Migration } from 'kysely';
import { settlementInit } from './2026-11-22-0600-settlement-init';
import { availableMayBeNegative } from './2026-11-22-0700-available-may-be-negative';
import { unmatchedTransferRefunds } from './2026-11-22-0900-unmatched-transfer-refunds';
import { relayedAuthorizations } from './2026-11-22-1100-relayed-authorizations';
import { platformPayouts } from './2026-11-25-1400-platform-payouts';
import { depositSweeps } from './2026-11-25-1600-deposit-sweeps';
import { reorgWatch } from './2026-11-26-1400-reorg-watch';
import { skipReservationCancelled } from './2026-11-29-0900-skip-reservation-cancelled';
import { recordedAcknowledged } from './2026-11-29-0910-recorded-acknowledged';
import { relayerRefusedPayers } from './2026-12-02-0400-relayer-refused-payers';
import { payoutsByEvents } from './2026-12-02-0720-payouts-by-events';
import { unservedBatchRefunds } from './2026-12-02-0730-unserved-batch-refunds';
import { relayerKeyPool } from './2026-12-02-0800-relayer-key-pool';

/** Frozen, date-prefixed migrations of the settlement schema. They never import application code. */
export const migrations: Record<string, Migration> = {
  '2026-11-22-0600-settlement-init': settlementInit,
  '2026-11-22-0700-available-may-be-negative': availableMayBeNegative,
  '2026-11-22-0900-unmatched-transfer-refunds': unmatchedTransferRefunds,
  '2026-11-22-1100-relayed-authorizations': relayedAuthorizations,
  '2026-11-25-1400-platform-payouts': platformPayouts,
  '2026-11-25-1600-deposit-sweeps': depositSweeps,
  '2026-11-26-1400-reorg-watch': reorgWatch,
  '2026-11-29-0900-skip-reservation-cancelled': skipReservationCancelled,
  '2026-11-29-0910-recorded-acknowledged': recordedAcknowledged,
  '2026-12-02-0400-relayer-refused-payers': relayerRefusedPayers,
  '2026-12-02-0730-unserved-batch-refunds': unservedBatchRefunds,
  '2026-12-02-0720-payouts-by-events': payoutsByEvents,
  '2026-12-02-0800-relayer-key-pool': relayerKeyPool,
};
