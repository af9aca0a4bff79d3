import { lockTransferEvents } from '@paygate/bus';
import { notFound } from '@paygate/http';
import type { CheckoutTrx, TransferRow } from '../db';

/** Serialises everything checkout decides about one transfer (observed, reorged, claimed elsewhere) across replicas. */
export const lockTransferKey = (trx: CheckoutTrx, chainId: number, txHash: string, logIndex: number) =>
  lockTransferEvents(trx, 'checkout-transfer', { chainId, txHash, logIndex });

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

/** The session of this id, row-locked (then executeTakeFirst, or …OrThrow). */
export const lockSession = (trx: CheckoutTrx, sessionId: string) =>
  trx.selectFrom('sessions').selectAll().where('session_id', '=', sessionId).forUpdate();

/** The transfer an operator names, locked: 404 when there is none. */
export async function lockTransferById(trx: CheckoutTrx, transferId: string): Promise<TransferRow> {
  const transfer = await trx
    .selectFrom('transfers')
    .selectAll()
    .where('transfer_id', '=', transferId)
    .forUpdate()
    .executeTakeFirst();
  if (!transfer) throw notFound('transfer');
  return transfer;
}
