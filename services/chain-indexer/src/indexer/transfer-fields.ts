import { formatUsdc } from '@paygate/money';
import type { ChainIndexerConfig } from '../config';
import type { TransfersTable } from './tables';

/** The chain a transfer was seen on, as the transfer events name it. */
export type TransferChain = Pick<ChainIndexerConfig, 'chainId' | 'network'>;

type StoredTransfer = Omit<TransfersTable, 'chain_id' | 'status' | 'seen_at' | 'published_at' | 'reorged_at'>;

/** What transfer.observed and transfer.reorged both say of a transfer: one mapping from the stored row. */
export function transferEventFields(chain: TransferChain, transfer: StoredTransfer) {
  return {
    chainId: chain.chainId,
    network: chain.network,
    txHash: transfer.tx_hash,
    logIndex: transfer.log_index,
    blockNumber: Number(transfer.block_number),
    blockHash: transfer.block_hash,
    from: transfer.from_address,
    to: transfer.to_address,
    token: transfer.token,
    amount: formatUsdc(transfer.amount_micro),
  };
}
