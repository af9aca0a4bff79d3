import { parseChainUsdc } from '@paygate/money';
import { sql } from 'kysely';
import type { LedgerTrx, TransferRow } from '../db';
import { transferKey } from '../ledger/entries';

/** What an inclusion causes is keyed per inclusion: `<key>` for the first, `<key>#<n>` after re-inclusions. */
export const perInclusion = (key: string, inclusion: number) => (inclusion > 0 ? `${key}#${inclusion}` : key);
export const transferEntryKey = (key: string, inclusion = 0) => `transfer:${perInclusion(key, inclusion)}`;

/** The ledger's lock space for one transfer's events (lockTransferEvents): observed and reorged never interleave. */
export const TRANSFER_LOCK_SCOPE = 'ledger-transfer';

export async function lockTransfer(
  trx: LedgerTrx,
  chainId: number,
  txHash: string,
  logIndex: number,
): Promise<TransferRow | undefined> {
  const result = await sql<TransferRow>`select * from transfers
      where chain_id = ${chainId} and tx_hash = ${txHash} and log_index = ${logIndex} for update`.execute(
    trx,
  );
  return result.rows[0];
}

/** Why the booked transfer cannot be refunded as requested (checked in this order), or null when the books agree. */
export function bookedTransferDiffers(
  requested: { amount: string; from: string },
  booked: Pick<TransferRow, 'status' | 'amount_micro' | 'from_address'>,
): 'transfer_reorged' | 'amount_differs' | 'payer_differs' | null {
  if (booked.status === 'reorged') return 'transfer_reorged';
  if (parseChainUsdc(requested.amount) !== booked.amount_micro) return 'amount_differs';
  return requested.from.toLowerCase() !== booked.from_address.toLowerCase() ? 'payer_differs' : null;
}

/** Posts a `transfer_in` entry (D escrow_asset / C suspense, sql/ledger.sql's one definition); null when the key was used. */
export async function postTransferIn(
  trx: LedgerTrx,
  input: { idempotencyKey: string; amountMicro: bigint; memo: Record<string, unknown> },
): Promise<bigint | null> {
  if (input.amountMicro < 0n) throw new RangeError(`negative line amount in ${input.idempotencyKey}`);
  const result = await sql<{
    id: bigint | null;
  }>`select post_transfer_in(${input.idempotencyKey}, ${input.amountMicro.toString()}::bigint,
      ${JSON.stringify(input.memo)}::jsonb) as id`.execute(trx);
  return result.rows[0]?.id ?? null;
}

/**
 * Books money the indexer observed arriving, row and entry in one step: whichever of transfer.observed and the
 * payment's claim comes first books it, the other finds it booked (false).
 */
export async function bookTransfer(
  trx: LedgerTrx,
  input: {
    chainId: number;
    txHash: string;
    logIndex: number;
    amountMicro: bigint;
    from: string;
    to: string | null;
    blockNumber: number | null;
    blockHash: string | null;
    at: Date;
  },
): Promise<boolean> {
  const inserted =
    await sql`insert into transfers (chain_id, tx_hash, log_index, amount_micro, from_address, to_address,
        block_number, block_hash, status, booked_by, observed_at, chain_confirmed_at)
      values (${input.chainId}, ${input.txHash}, ${input.logIndex}, ${input.amountMicro}, ${input.from.toLowerCase()},
        ${input.to?.toLowerCase() ?? null}, ${input.blockNumber}, ${input.blockHash}, 'observed', 'transfer.observed',
        ${input.at}, ${input.at})
      on conflict do nothing`.execute(trx);
  if (Number(inserted.numAffectedRows ?? 0n) === 0) return false;
  const key = transferKey(input.chainId, input.txHash, input.logIndex);
  await postTransferIn(trx, {
    idempotencyKey: transferEntryKey(key),
    amountMicro: input.amountMicro,
    memo: { transfer: key, from: input.from.toLowerCase(), bookedBy: 'transfer.observed' },
  });
  return true;
}
