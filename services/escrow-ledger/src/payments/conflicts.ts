import { sql } from 'kysely';
import type { ConflictKind, LedgerTrx } from '../db';
import type { LedgerDeps } from '../deps';
import { transferKey } from '../ledger/entries';

/** Records a conflict for the operator (once per kind, transfer and payment), counted and logged. */
export async function recordConflict(
  trx: LedgerTrx,
  deps: LedgerDeps,
  kind: ConflictKind,
  input: {
    chainId: number;
    txHash: string;
    logIndex: number;
    paymentId: string | null;
    source: string | null;
    sellerId: string | null;
    amountMicro: bigint | null;
    existingTransactionId: string | null;
    detail: Record<string, unknown>;
  },
): Promise<void> {
  const inserted =
    await sql`insert into payment_conflicts (kind, chain_id, tx_hash, log_index, payment_id, source, seller_id,
        amount_micro, existing_transaction_id, detail, created_at)
      values (${kind}, ${input.chainId}, ${input.txHash}, ${input.logIndex}, ${input.paymentId}, ${input.source},
        ${input.sellerId}, ${input.amountMicro}, ${input.existingTransactionId}, ${JSON.stringify(input.detail)}::jsonb, ${deps.now()})
      on conflict do nothing`.execute(trx);
  if (Number(inserted.numAffectedRows ?? 0n) > 0) {
    reportConflict(deps, kind, {
      transfer: transferKey(input.chainId, input.txHash, input.logIndex),
      paymentId: input.paymentId,
      existingTransactionId: input.existingTransactionId,
    });
  }
}

/** A payment conflict set aside for the operator: counted and logged (nothing was credited). */
export function reportConflict(deps: LedgerDeps, kind: string | null, fields: Record<string, unknown>): void {
  deps.metrics.conflicts.inc({ kind: kind ?? 'unknown' });
  deps.logger.warn({ kind, ...fields }, 'payment conflict surfaced to the operator; nothing credited');
}
