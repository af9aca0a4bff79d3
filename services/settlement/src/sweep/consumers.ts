import type { ConsumerOptions } from '@paygate/bus';
import type { SettlementDB } from '../db';

/**
 * `deposit.address_assigned` → the derivation index of a session's deposit address, so the sweeper can derive
 * its key. Idempotent: a redelivery, or an address a transfer was already observed at, keeps one row.
 */
export function depositAddressAssignedConsumer(
  chainId: number,
): ConsumerOptions<'deposit.address_assigned', SettlementDB> {
  return {
    durable: 'settlement-deposit-addresses',
    subject: 'deposit.address_assigned',
    concurrency: 4,
    async handler(trx, event) {
      const d = event.data;
      if (d.chainId !== chainId) return;
      await trx
        .insertInto('deposit_addresses')
        .values({
          address: d.address.toLowerCase(),
          derivation_index: BigInt(d.derivationIndex),
          session_id: d.sessionId,
          check_due_at: null,
          last_balance_micro: null,
        })
        .onConflict((oc) =>
          oc.column('address').doUpdateSet({
            derivation_index: BigInt(d.derivationIndex),
            session_id: d.sessionId,
            updated_at: new Date(),
          }),
        )
        .execute();
    },
  };
}

/**
 * `transfer.observed` at a session deposit address (anything the indexer reports that is not one of the fixed
 * wallets) → the address may hold money now: reconciliation counts it and the sweeper reads it at once.
 */
export function depositTransferConsumer(options: {
  chainId: number;
  usdcAddress: string;
  /** The escrow wallet and the old checkout deposit wallet: money there is not in a deposit address. */
  fixedWallets: string[];
  onDue: () => void;
}): ConsumerOptions<'transfer.observed', SettlementDB> {
  const fixed = new Set(options.fixedWallets.map((a) => a.toLowerCase()));
  return {
    durable: 'settlement-deposit-transfers',
    subject: 'transfer.observed',
    concurrency: 4,
    afterCommit: () => options.onDue(),
    async handler(trx, event) {
      const d = event.data;
      const to = d.to.toLowerCase();
      if (d.chainId !== options.chainId || fixed.has(to)) return;
      if (d.token.toLowerCase() !== options.usdcAddress.toLowerCase()) return;
      await trx
        .insertInto('deposit_addresses')
        .values({
          address: to,
          derivation_index: null,
          session_id: null,
          holding: true,
          check_due_at: new Date(),
          last_balance_micro: null,
        })
        .onConflict((oc) =>
          oc
            .column('address')
            .doUpdateSet({ holding: true, check_due_at: new Date(), updated_at: new Date() }),
        )
        .execute();
    },
  };
}
