import type { Migration } from 'kysely';
import { init } from './2026-11-22-0100-init';
import { transferRefundRequests } from './2026-11-22-0900-transfer-refund-requests';
import { claimedTransfers } from './2026-11-22-1000-claimed-transfers';
import { refundedSessions } from './2026-11-23-2100-refunded-sessions';
import { sessionLimits } from './2026-11-25-1400-session-limits';
import { depositAddresses } from './2026-11-25-1600-deposit-addresses';
import { claimedVia } from './2026-11-26-1700-claimed-via';
import { reorgTombstones } from './2026-11-29-0600-reorg-tombstones';
import { checkoutMatching } from './2026-12-02-0300-checkout-matching';

/** Frozen, date-prefixed migrations of the checkout schema. They never import application code. */
export const migrations: Record<string, Migration> = {
  '2026-11-22-0100-init': init,
  '2026-11-22-0900-transfer-refund-requests': transferRefundRequests,
  '2026-11-22-1000-claimed-transfers': claimedTransfers,
  '2026-11-23-2100-refunded-sessions': refundedSessions,
  '2026-11-25-1400-session-limits': sessionLimits,
  '2026-11-25-1600-deposit-addresses': depositAddresses,
  '2026-11-26-1700-claimed-via': claimedVia,
  '2026-11-29-0600-reorg-tombstones': reorgTombstones,
  '2026-12-02-0300-checkout-matching': checkoutMatching,
};
