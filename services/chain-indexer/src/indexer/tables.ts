import type { BusTables } from '@paygate/bus';
import type { Generated } from 'kysely';

interface CursorsTable {
  chain_id: number;
  next_block: bigint;
  updated_at: Generated<Date>;
}

export interface RecentBlocksTable {
  chain_id: number;
  number: bigint;
  hash: string;
}

type TransferStatus = 'pending' | 'published' | 'reorged';

export interface TransfersTable {
  chain_id: number;
  block_hash: string;
  tx_hash: string;
  log_index: number;
  block_number: bigint;
  from_address: string;
  to_address: string;
  token: string;
  amount_micro: bigint;
  status: TransferStatus;
  seen_at: Generated<Date>;
  published_at: Date | null;
  reorged_at: Date | null;
}

/** A session deposit address checkout assigned (`deposit.address_assigned`); lower-case. */
interface DepositAddressesTable {
  address: string;
  derivation_index: bigint;
  session_id: string;
  assigned_at: Date;
  watch_until: Date;
  backfilled: Generated<boolean>;
  registered_at: Generated<Date>;
  /** The scanner's cursor when the address was registered (null before the first pass). */
  registered_block: bigint | null;
}

export interface IndexerDatabase extends BusTables {
  deposit_addresses: DepositAddressesTable;
  cursors: CursorsTable;
  recent_blocks: RecentBlocksTable;
  transfers: TransfersTable;
}
