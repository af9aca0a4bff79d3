import type { SkipReason } from './db';

/** Settlement's refusals to a caller (`error.code`): a platform payout asked for (409). */
export const SettlementReason = {
  NothingAvailable: 'nothing_available',
  TreasuryNotConfigured: 'treasury_not_configured',
} as const;

/** Why the ledger reserved nothing for a settlement (`payout.refused`; the settlement is `skipped`). */
export const SkipReasons = {
  /** the ledger's available balance is below the seller's minimum settlement amount */
  BelowMinimum: 'below_minimum',
  /** nothing (or less than nothing: a refund after settlement) is available */
  NothingAvailable: 'nothing_available',
} as const satisfies Record<string, SkipReason>;

/** Why settle-now paid nothing to a seller: the ledger's refusal, or one of its own. */
export const SettleNowSkip = {
  ...SkipReasons,
  /** this period already has a payout (sending, completed or failed): one payout per seller and period */
  AlreadySettledThisPeriod: 'already_settled_this_period',
  /** the ledger has not decided within LEDGER_TIMEOUT_MS; the settlement stays pending until it does */
  LedgerUnavailable: 'ledger_unavailable',
} as const;

export type SettleNowSkipReason = (typeof SettleNowSkip)[keyof typeof SettleNowSkip];

/** Why a transfer out of escrow was refused before signing (`settlement_transfers_refused_total{reason}`). */
export const TransferRefusal = {
  ExceedsTransferCap: 'exceeds_transfer_cap',
  RecipientDiffers: 'recipient_differs',
} as const;
