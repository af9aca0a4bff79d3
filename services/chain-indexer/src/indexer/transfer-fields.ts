import { formatUsdc } from '@paygate/money';
import type { ChainIndexerConfig } from '../config';
import type { TransfersTable } from './tables';

/** The chain a transfer was seen on, as the transfer events name it. */
export interface TransferChain {
  chainId: number;
  network: ChainIndexerConfig['network'];
}

type StoredTransfer = Pick<
  TransfersTable,
  | 'tx_hash'
  | 'log_index'
  | 'block_number'
  | 'block_hash'
  | 'from_address'
  | 'to_address'
  | 'token'
  | 'amount_micro'
>;

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
