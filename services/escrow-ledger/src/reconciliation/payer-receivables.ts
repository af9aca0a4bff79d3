import { formatUsdc } from '@paygate/money';
import { sql } from 'kysely';
import type { LedgerDb } from '../db';

/** What payers owe back, in the reconciliation's exposure (refunds/receivables.ts). */
export interface PayerExposure {
  /**
   * Refunds of unmatched transfers that a reorg then dropped (refund_receivable, by payer): paid out of escrow for
   * money that never arrived. Not a difference (escrow_asset is at the chain), but escrow holds that much less than
   * the ledger owes: the operator recovers it from the payer or writes it off; a re-inclusion settles it.
   */
  owedByPayers: string;
}

export async function payerExposure(db: LedgerDb): Promise<PayerExposure> {
  const row = await sql<{ owed: bigint | null }>`select sum(balance_micro)::bigint as owed
      from accounts where kind = 'refund_receivable'`.execute(db);
  return { owedByPayers: formatUsdc(BigInt(row.rows[0]?.owed ?? 0n)) };
}
