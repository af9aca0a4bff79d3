import type { ConsumerOptions } from '@paygate/bus';
import type { SettlementDB } from '../db';
import type { EscrowChain } from '../transfers/chain';

/** `deposit.address_assigned` → the derivation index the sweeper derives the address's key from. */
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
      const columns = { derivation_index: BigInt(d.derivationIndex), session_id: d.sessionId };
      await trx
        .insertInto('deposit_addresses')
        .values({ address: d.address.toLowerCase(), ...columns })
        .onConflict((oc) => oc.column('address').doUpdateSet({ ...columns, updated_at: new Date() }))
        .execute();
    },
  };
}

/** `transfer.observed` at a deposit address (not a fixed wallet) → it may hold money: counted and read at once. */
export function depositTransferConsumer(
  escrow: Pick<EscrowChain, 'chainId' | 'usdcAddress' | 'address'>,
  checkoutWallet: string | undefined,
  onDue: () => void,
): ConsumerOptions<'transfer.observed', SettlementDB> {
  const fixed = new Set([escrow.address, checkoutWallet].flatMap((a) => (a ? [a.toLowerCase()] : [])));
  return {
    durable: 'settlement-deposit-transfers',
    subject: 'transfer.observed',
    concurrency: 4,
    afterCommit: onDue,
    async handler(trx, event) {
      const d = event.data;
      const to = d.to.toLowerCase();
      if (d.chainId !== escrow.chainId || fixed.has(to)) return;
      if (d.token.toLowerCase() !== escrow.usdcAddress.toLowerCase()) return;
      await trx
        .insertInto('deposit_addresses')
        .values({ address: to, holding: true, check_due_at: new Date() })
        .onConflict((oc) =>
          oc
            .column('address')
            .doUpdateSet({ holding: true, check_due_at: new Date(), updated_at: new Date() }),
        )
        .execute();
    },
  };
}
