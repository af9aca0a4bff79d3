import type { BusTables } from '@paygate/bus';
import type { EventData } from '@paygate/contracts';
import type { Generated } from 'kysely';
import type { RelayedAuthorizationsTable, RelayerRefusedPayersTable } from './relayer/tables';
import type { DepositAddressesTable, DepositSweepsTable } from './sweep/tables';

export type Frequency = 'DAILY' | 'WEEKLY' | 'MONTHLY';
export type TransferKind = 'payout' | 'refund' | 'platform_payout';
export type TransferStatus = 'created' | 'signed' | 'broadcast' | 'confirmed' | 'failed';
export type SettlementStatus = 'pending' | 'skipped' | 'sending' | 'completed' | 'failed';
export type RefundStatus = 'sending' | 'completed' | 'failed';
/** Why a settlement paid nothing: the ledger's refusal to reserve (`payout.refused`). */
export type SkipReason = EventData<'payout.refused'>['reason'];

export interface SellersTable {
  seller_id: string;
  revision: number;
  payout_address: string;
  settlement_frequency: Frequency;
  minimum_settlement_micro: bigint;
  last_scheduled_period: string;
  updated_at: Generated<Date>;
}

export interface OutgoingTransfersTable {
  transfer_id: string;
  kind: TransferKind;
  idempotency_key: string;
  chain_id: number;
  token_address: string;
  from_address: string;
  to_address: string;
  amount_micro: bigint;
  status: TransferStatus;
  nonce: bigint | null;
  raw_tx: string | null;
  tx_hash: string | null;
  block_number: bigint | null;
  preflight_attempts: Generated<number>;
  broadcast_attempts: Generated<number>;
  last_error: string | null;
  next_attempt_at: Generated<Date>;
  created_at: Generated<Date>;
  signed_at: Date | null;
  last_broadcast_at: Date | null;
  confirmed_at: Date | null;
  failed_at: Date | null;
  /**
   * Set once a confirmed transaction is deeper than the reorg window; until then its receipt is watched. Cleared
   * when a deeper reorg frees its nonce, so it is watched (and its same bytes sent) again.
   */
  final_at: Date | null;
  /** Times the recorded transaction was broadcast again after a reorg took it off the chain. */
  reorg_rebroadcasts: Generated<number>;
}

export interface SettlementsTable {
  settlement_id: string;
  seller_id: string;
  period_key: string;
  frequency: Frequency;
  period_start: Date;
  period_end: Date;
  status: SettlementStatus;
  minimum_micro: bigint;
  available_micro: bigint | null;
  amount_micro: bigint | null;
  payout_address: string;
  transfer_id: string | null;
  tx_hash: string | null;
  skip_reason: SkipReason | null;
  failure_reason: string | null;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
  completed_at: Date | null;
}

export interface RefundsTable {
  refund_id: string;
  /**
   * `unmatched_transfer`: money that matched no payment, sent back to its payer (no transaction, no seller);
   * `unserved_batch`: a payer's refunds of calls their sellers did not serve, as one transfer (neither either).
   */
  kind: Generated<'payment' | 'unmatched_transfer' | 'unserved_batch'>;
  transaction_id: string | null;
  seller_id: string | null;
  payer: string;
  amount_micro: bigint;
  chain_id: number;
  status: RefundStatus;
  transfer_id: string;
  refund_tx_hash: string | null;
  initiated_at: Date;
  created_at: Generated<Date>;
  completed_at: Date | null;
}

/** A payout of the platform's revenue to the treasury address (an operator's request). */
export interface PlatformPayoutsTable {
  payout_id: string;
  /** `requested` until the ledger decides it; `refused`: the platform revenue held nothing. */
  status: 'requested' | 'refused' | 'sending' | 'completed' | 'failed';
  /** null until the ledger reserved it. */
  amount_micro: bigint | null;
  treasury_address: string;
  transfer_id: string | null;
  tx_hash: string | null;
  failure_reason: string | null;
  created_at: Generated<Date>;
  completed_at: Date | null;
}

export interface SettlementDB extends BusTables {
  sellers: SellersTable;
  outgoing_transfers: OutgoingTransfersTable;
  settlements: SettlementsTable;
  refunds: RefundsTable;
  relayed_authorizations: RelayedAuthorizationsTable;
  relayer_refused_payers: RelayerRefusedPayersTable;
  platform_payouts: PlatformPayoutsTable;
  deposit_addresses: DepositAddressesTable;
  deposit_sweeps: DepositSweepsTable;
}
