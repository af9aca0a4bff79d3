import { HttpError } from '@paygate/http';
import type { CheckoutTrx, TransferRow } from '../db';

/** The transfer at a chain position (chain, transaction hash, log index), locked; undefined when not recorded. */
export function lockTransferAt(
  trx: CheckoutTrx,
  at: { chainId: number; txHash: string; logIndex: number },
): Promise<TransferRow | undefined> {
  return trx
    .selectFrom('transfers')
    .selectAll()
    .where('chain_id', '=', at.chainId)
    .where('tx_hash', '=', at.txHash.toLowerCase())
    .where('log_index', '=', at.logIndex)
    .forUpdate()
    .executeTakeFirst();
}

/** The transfer an operator names, locked: 404 when there is none. */
export async function lockTransferById(trx: CheckoutTrx, transferId: string): Promise<TransferRow> {
  const transfer = await trx
    .selectFrom('transfers')
    .selectAll()
    .where('transfer_id', '=', transferId)
    .forUpdate()
    .executeTakeFirst();
  if (!transfer) throw new HttpError(404, 'not_found', 'transfer not found');
  return transfer;
}
