import type { Generated } from 'kysely';

/** A session deposit address (see the 2026-11-25-1600 migration); lower-case. */
export interface DepositAddressesTable {
  address: string;
  /** Null until `deposit.address_assigned` arrives (a transfer to it may be observed first). */
  derivation_index: bigint | null;
  session_id: string | null;
  /** May hold USDC: a transfer to it was observed and it was not seen empty since (reconciliation counts it). */
  holding: Generated<boolean>;
  /** When the sweeper should read its balance next; null: nothing new since (dust below the threshold waits). */
  check_due_at: Date | null;
  last_balance_micro: bigint | null;
  updated_at: Generated<Date>;
}

export type DepositSweepStatus = 'open' | 'confirmed' | 'failed';

/** One EIP-3009 authorization moving a deposit address's balance into escrow, recorded before it is submitted. */
export interface DepositSweepsTable {
  sweep_id: string;
  address: string;
  amount_micro: bigint;
  auth_nonce: string;
  valid_after: bigint;
  valid_before: bigint;
  signature: string;
  status: DepositSweepStatus;
  tx_hash: string | null;
  last_error: string | null;
  created_at: Generated<Date>;
  finished_at: Date | null;
}
