import type { Generated } from 'kysely';

export type RelayedStatus = 'signed' | 'broadcast' | 'confirmed' | 'used_elsewhere' | 'failed';

/** One EIP-3009 authorization the relayer was asked to submit (see the 2026-11-22-1100 migration). */
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
  status: RelayedStatus;
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

/**
 * A payer the relayer no longer submits for (see the 2026-12-02-0400 migration): by address, or by the code hash of a
 * contract payer (every address with that code), after a transaction relayed for it reverted on chain.
 */
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

/**
 * A contract payer whose relayed transaction reverted for its own check, by its code hash (see the 2026-12-02-0800
 * migration): the code hash is refused once RELAYER_CODE_HASH_REFUSAL_PAYERS distinct payers of it are here within
 * RELAYER_REVERT_REFUSAL_HOURS. Not in SettlementDB: read through `withTables` (./refused-payers), its only user.
 */
export interface RelayerCodeHashRevertsTable {
  chain_id: number;
  code_hash: string;
  payer: string;
  tx_hash: string;
  reverted_at: Date;
}
