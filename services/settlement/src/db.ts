import { createHash } from 'node:crypto';
import type { BusTables } from '@paygate/bus';
import type { EventData } from '@paygate/contracts';
import { type Generated, sql, type Transaction } from 'kysely';

export const FREQUENCIES = ['DAILY', 'WEEKLY', 'MONTHLY'] as const;
export type Frequency = (typeof FREQUENCIES)[number];
export const TRANSFER_KINDS = ['payout', 'refund', 'platform_payout'] as const;
export type TransferKind = (typeof TRANSFER_KINDS)[number];
export const SETTLEMENT_STATUSES = ['pending', 'skipped', 'sending', 'completed', 'failed'] as const;
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
  status: 'created' | 'signed' | 'broadcast' | 'confirmed' | 'failed';
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
  /** Set once deeper than the reorg window; cleared when a deeper reorg frees its nonce. */
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
  status: (typeof SETTLEMENT_STATUSES)[number];
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
  /** `unmatched_transfer` and `unserved_batch` (a payer's unserved calls) have no transaction or seller. */
  kind: Generated<'payment' | 'unmatched_transfer' | 'unserved_batch'>;
  transaction_id: string | null;
  seller_id: string | null;
  payer: string;
  amount_micro: bigint;
  chain_id: number;
  status: 'sending' | 'completed' | 'failed';
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

/** One EIP-3009 authorization the relayer was asked to submit. */
export interface RelayedAuthorizationsTable {
  id: string;
  chain_id: number;
  token_address: string;
  payer: string;
  auth_nonce: string;
  to_address: string;
  value_micro: bigint;
  valid_after: bigint;
  valid_before: bigint;
  signature: string;
  status: 'signed' | 'broadcast' | 'confirmed' | 'used_elsewhere' | 'failed';
  relayer_address: string;
  relayer_nonce: bigint | null;
  gas_limit: bigint | null;
  raw_tx: string | null;
  tx_hash: string | null;
  /** Hashes of the same relayer nonce signed before a fee bump: any of them may be the one mined. */
  earlier_tx_hashes: Generated<string[]>;
  max_fee_per_gas: string | null;
  max_priority_fee_per_gas: string | null;
  fee_bumps: Generated<number>;
  broadcast_attempts: Generated<number>;
  /** The transaction that executed the authorization (ours, or another submitter's). */
  settled_tx_hash: string | null;
  block_number: bigint | null;
  log_index: number | null;
  last_error: string | null;
  created_at: Generated<Date>;
  signed_at: Date | null;
  last_broadcast_at: Date | null;
  finished_at: Date | null;
  /** Set once a confirmed transaction is deeper than the reorg window; until then its receipt is watched. */
  final_at: Date | null;
  /** Times the recorded transaction was broadcast again after a reorg took it off the chain. */
  reorg_rebroadcasts: Generated<number>;
  /** The keccak256 of the payer's code when the authorization was submitted; null for an account without code. */
  payer_code_hash: string | null;
}

/** A payer (by address, or every address with its code hash) refused after its relayed transaction reverted. */
export interface RelayerRefusedPayersTable {
  chain_id: number;
  kind: 'payer' | 'code_hash';
  /** The payer's address, or its code hash (lowercase hex). */
  subject: string;
  /** The payer whose relayed transaction reverted. */
  payer: string;
  tx_hash: string;
  reason: string;
  refused_at: Generated<Date>;
  refused_until: Date;
}

/** A contract payer whose own check reverted, by code hash (./relayer/refused-payers). */
export interface RelayerCodeHashRevertsTable {
  chain_id: number;
  code_hash: string;
  payer: string;
  tx_hash: string;
  reverted_at: Date;
}

/** A session deposit address, lower-case. */
export interface DepositAddressesTable {
  address: string;
  /** Null until `deposit.address_assigned` arrives (a transfer to it may be observed first). */
  derivation_index: bigint | null;
  session_id: string | null;
  /** May hold USDC (reconciliation counts it). */
  holding: Generated<boolean>;
  /** When the sweeper reads its balance next; null: nothing new since. */
  check_due_at: Date | null;
  last_balance_micro: bigint | null;
  updated_at: Generated<Date>;
}

/** One EIP-3009 authorization moving a deposit address's balance into escrow, recorded before it is submitted. */
export interface DepositSweepsTable {
  sweep_id: string;
  address: string;
  amount_micro: bigint;
  auth_nonce: string;
  valid_after: bigint;
  valid_before: bigint;
  signature: string;
  status: 'open' | 'confirmed' | 'failed';
  tx_hash: string | null;
  last_error: string | null;
  created_at: Generated<Date>;
  finished_at: Date | null;
}

export const larger = (a: bigint, b: bigint) => (a > b ? a : b);
export const smaller = (a: bigint, b: bigint) => (a < b ? a : b);

/** Recorded rows a background pass looks at, at most. */
export const OPEN_BATCH = 100;

/** The columns of one more broadcast of a recorded transaction (outgoing transfers, relayed authorizations). */
export const broadcastCounted = (options: { reorg?: boolean } = {}) => ({
  last_broadcast_at: new Date(),
  broadcast_attempts: sql<number>`broadcast_attempts + 1`,
  ...(options.reorg ? { reorg_rebroadcasts: sql<number>`reorg_rebroadcasts + 1` } : {}),
});

/** A pg_advisory_xact_lock key (a signed 64-bit integer) named by `name`. */
export function advisoryLockKey(name: string): string {
  const digest = createHash('sha256').update(name).digest();
  return BigInt.asIntN(64, BigInt(`0x${digest.subarray(0, 8).toString('hex')}`)).toString();
}

/** Takes a transaction-scoped advisory lock named with the schema (deployments sharing a database have their own). */
export async function tryAdvisoryLock(trx: Transaction<SettlementDB>, name: string): Promise<boolean> {
  const locked = await sql<{ locked: boolean }>`
    select pg_try_advisory_xact_lock(hashtextextended(${name} || ':' || current_schema(), 0)) as locked`.execute(
    trx,
  );
  return locked.rows[0]?.locked === true;
}

export interface SettlementDB extends BusTables {
  sellers: SellersTable;
  outgoing_transfers: OutgoingTransfersTable;
  settlements: SettlementsTable;
  refunds: RefundsTable;
  relayed_authorizations: RelayedAuthorizationsTable;
  relayer_refused_payers: RelayerRefusedPayersTable;
  relayer_code_hash_reverts: RelayerCodeHashRevertsTable;
  platform_payouts: PlatformPayoutsTable;
  deposit_addresses: DepositAddressesTable;
  deposit_sweeps: DepositSweepsTable;
}
