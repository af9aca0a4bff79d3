import { type DeclaredConsumer, defineConsumer } from '@paygate/bus';
import type { LedgerDatabase } from '../db';
import type { LedgerDeps } from '../deps';
import { onSellerUpdated } from './addresses';
import { onPlatformPayoutCompleted, onPlatformPayoutFailed, onPlatformPayoutRequested } from './platform';
import { onSellerPayoutFailed, onSettlementCompleted, onSettlementDue } from './seller';

/**
 * What leaves escrow to sellers and the treasury, decided here: settlement's due payouts and platform payout
 * requests are reserved (or refused) in the inbox transaction with `payout.reserved` / `payout.refused` in the
 * outbox; settlement's outcomes book the payout out of escrow or give the reservation back.
 */
export function payoutConsumers(d: LedgerDeps): DeclaredConsumer<LedgerDatabase>[] {
  return [
    defineConsumer({
      durable: 'ledger-seller-payout-addresses',
      subject: 'seller.updated',
      handler: (trx, e) => onSellerUpdated(trx, e),
    }),
    defineConsumer({
      durable: 'ledger-settlement-due',
      subject: 'settlement.due',
      handler: (trx, e) => onSettlementDue(trx, e, d),
      concurrency: 4,
    }),
    defineConsumer({
      durable: 'ledger-platform-payout-requested',
      subject: 'revenue.payout_requested',
      handler: (trx, e) => onPlatformPayoutRequested(trx, e, d),
    }),
    defineConsumer({
      durable: 'ledger-payout-failed',
      subject: 'payout.failed',
      handler: (trx, e) =>
        e.data.kind === 'seller'
          ? onSellerPayoutFailed(trx, e.data, d)
          : onPlatformPayoutFailed(trx, e.data, d),
    }),
    defineConsumer({
      durable: 'ledger-settlement-completed',
      subject: 'settlement.completed',
      handler: (trx, e) => onSettlementCompleted(trx, e, d),
      concurrency: 4,
    }),
    defineConsumer({
      durable: 'ledger-platform-payout-completed',
      subject: 'revenue.paid_out',
      handler: (trx, e) => onPlatformPayoutCompleted(trx, e, d),
    }),
  ];
}
