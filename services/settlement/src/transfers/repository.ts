import { newEventId } from '@paygate/contracts';
import type { Selectable, Transaction } from 'kysely';
import type { OutgoingTransfersTable, SettlementDB, TransferKind } from '../db';
import { NonPositiveTransferError } from '../errors';
import type { EscrowChain } from './chain';

export type TransferRow = Selectable<OutgoingTransfersTable>;

interface NewTransfer {
  kind: TransferKind;
  /** settlementId for a payout, refundId for a refund: one transfer per key, ever. */
  idempotencyKey: string;
  toAddress: string;
  amountMicro: bigint;
}

/** Records a transfer out of escrow (`created`) and returns its id; the same (kind, key) returns the same one. */
export async function recordTransfer(
  trx: Transaction<SettlementDB>,
  escrow: Pick<EscrowChain, 'chainId' | 'usdcAddress' | 'address'>,
  input: NewTransfer,
): Promise<string> {
  if (input.amountMicro <= 0n) throw new NonPositiveTransferError();
  await trx
    .insertInto('outgoing_transfers')
    .values({
      transfer_id: `otx_${newEventId()}`,
      kind: input.kind,
      idempotency_key: input.idempotencyKey,
      chain_id: escrow.chainId,
      token_address: escrow.usdcAddress.toLowerCase(),
      from_address: escrow.address.toLowerCase(),
      to_address: input.toAddress,
      amount_micro: input.amountMicro,
      status: 'created',
    })
    .onConflict((oc) => oc.columns(['kind', 'idempotency_key']).doNothing())
    .execute();
  const row = await trx
    .selectFrom('outgoing_transfers')
    .select('transfer_id')
    .where('kind', '=', input.kind)
    .where('idempotency_key', '=', input.idempotencyKey)
    .executeTakeFirstOrThrow();
  return row.transfer_id;
}
