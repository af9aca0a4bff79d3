import type { Generated } from 'kysely';

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

/** A contract payer whose own check reverted, by code hash. Not in SettlementDB: ./refused-payers uses `withTables`. */
export interface RelayerCodeHashRevertsTable {
  chain_id: number;
  code_hash: string;
  payer: string;
  tx_hash: string;
  reverted_at: Date;
}
