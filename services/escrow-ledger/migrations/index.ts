import type { Migration } from 'kysely';
import { ledgerInit } from './2026-11-22-0100-ledger';
import { bookPayments } from './2026-11-22-0200-book-payments';
import { batchedPostings } from './2026-11-22-0300-batched-postings';
import { orderedLocks } from './2026-11-22-0400-ordered-locks';
import { reorgReinclusion } from './2026-11-22-0500-reorg-reinclusion';
import { unmatchedTransferRefunds } from './2026-11-22-0900-unmatched-transfer-refunds';
import { transferClaims } from './2026-11-22-1000-transfer-claims';
import { transactionsLookup } from './2026-11-22-1200-transactions-lookup';
import { rateLimitWindows } from './2026-11-25-0200-rate-limit-windows';
import { sellerExposure } from './2026-11-25-1400-seller-exposure';
import { chainConfirmation } from './2026-11-26-1400-chain-confirmation';
import { payoutClaims } from './2026-11-26-1500-payout-claims';
import { callOutcomes } from './2026-11-26-1620-call-outcomes';
import { claimedVia } from './2026-11-26-1700-claimed-via';
import { refundReceivables } from './2026-11-26-1930-refund-receivables';
import { platformRevenueOwed } from './2026-11-29-0100-platform-revenue-owed';
import { platformPayoutClaims } from './2026-11-29-0200-platform-payout-claims';
import { reorgTombstones } from './2026-11-29-0600-reorg-tombstones';
import { payoutRecorded } from './2026-11-29-0700-payout-recorded';
import { chainCheckTurns } from './2026-11-29-0910-chain-check-turns';
import { claimPayments } from './2026-12-02-0700-claim-payments';
import { payoutsByEvents } from './2026-12-02-0720-payouts-by-events';
import { unservedRefunds } from './2026-12-02-0730-unserved-refunds';
/** Frozen, date-prefixed migrations of the ledger schema. They never import application code. */
export const migrations: Record<string, Migration> = {
  '2026-11-22-0100-ledger': ledgerInit,
  '2026-11-22-0200-book-payments': bookPayments,
  '2026-11-22-0300-batched-postings': batchedPostings,
  '2026-11-22-0400-ordered-locks': orderedLocks,
  '2026-11-22-0500-reorg-reinclusion': reorgReinclusion,
  '2026-11-22-0900-unmatched-transfer-refunds': unmatchedTransferRefunds,
  '2026-11-22-1000-transfer-claims': transferClaims,
  '2026-11-22-1200-transactions-lookup': transactionsLookup,
  '2026-11-25-0200-rate-limit-windows': rateLimitWindows,
  '2026-11-25-1400-seller-exposure': sellerExposure,
  '2026-11-26-1400-chain-confirmation': chainConfirmation,
  '2026-11-26-1500-payout-claims': payoutClaims,
  '2026-11-26-1620-call-outcomes': callOutcomes,
  '2026-11-26-1700-claimed-via': claimedVia,
  '2026-11-26-1930-refund-receivables': refundReceivables,
  '2026-11-29-0100-platform-revenue-owed': platformRevenueOwed,
  '2026-11-29-0200-platform-payout-claims': platformPayoutClaims,
  '2026-11-29-0600-reorg-tombstones': reorgTombstones,
  '2026-11-29-0700-payout-recorded': payoutRecorded,
  '2026-11-29-0910-chain-check-turns': chainCheckTurns,
  '2026-12-02-0730-unserved-refunds': unservedRefunds,
  '2026-12-02-0700-claim-payments': claimPayments,
  '2026-12-02-0720-payouts-by-events': payoutsByEvents,
};
