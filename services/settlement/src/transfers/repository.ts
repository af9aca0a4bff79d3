import { newEventId } from '@paygate/contracts';
import { type Kysely, type Selectable, sql, type Transaction } from 'kysely';
import type { OutgoingTransfersTable, SettlementDB, TransferKind } from '../db';
import { NonPositiveTransferError } from '../errors';

export type TransferRow = Selectable<OutgoingTransfersTable>;

export interface NewTransfer {
  kind: TransferKind;
  /** settlementId for a payout, refundId for a refund: one transfer per key, ever. */
  idempotencyKey: string;
  chainId: number;
  tokenAddress: string;
  fromAddress: string;
  toAddress: string;
  amountMicro: bigint;
}

/**
 * Records an outgoing transfer (status `created`, nothing signed yet) in the caller's transaction and returns its
 * id. Recording the same (kind, idempotencyKey) again returns the existing transfer and changes nothing.
 */
export async function recordTransfer(trx: Transaction<SettlementDB>, input: NewTransfer): Promise<string> {
  if (input.amountMicro <= 0n) throw new NonPositiveTransferError();
  await trx
    .insertInto('outgoing_transfers')
    .values({
      transfer_id: `otx_${newEventId()}`,
      kind: input.kind,
      idempotency_key: input.idempotencyKey,
      chain_id: input.chainId,
      token_address: input.tokenAddress.toLowerCase(),
      from_address: input.fromAddress.toLowerCase(),
      to_address: input.toAddress,
      amount_micro: input.amountMicro,
      status: 'created',
      nonce: null,
      raw_tx: null,
      tx_hash: null,
      block_number: null,
      last_error: null,
      signed_at: null,
      last_broadcast_at: null,
      confirmed_at: null,
      failed_at: null,
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

/**
 * Transfers not done within `olderThanMs`: unsigned that long after being recorded, or signed that long ago and
 * still without a confirmed receipt (rebroadcasting does not count as progress).
 */
export async function countStuckTransfers(db: Kysely<SettlementDB>, olderThanMs: number): Promise<number> {
  const result = await sql<{ count: string }>`
    select count(*)::text as count from outgoing_transfers
    where (status = 'created' and created_at < now() - make_interval(secs => ${olderThanMs / 1000}))
       or (status in ('signed', 'broadcast')
           and signed_at < now() - make_interval(secs => ${olderThanMs / 1000}))`.execute(db);
  return Number(result.rows[0]?.count ?? 0);
}
