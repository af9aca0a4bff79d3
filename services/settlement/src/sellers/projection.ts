import type { ConsumerOptions } from '@paygate/bus';
import { parseUsdc } from '@paygate/money';
import type { Clock } from '../clock';
import type { SettlementDB } from '../db';
import { periodAt } from '../schedule/periods';

/**
 * Keeps the settlement-relevant part of each seller (payout address, frequency, minimum) from `seller.updated`.
 * Snapshots not newer than the stored revision are ignored (redelivery, reordering).
 *
 * A seller is first settled at the start of the next period after it appears or changes its frequency:
 * `last_scheduled_period` is set to the current period, so a WEEKLY seller created on a Wednesday is first
 * settled on the following Monday, not at once.
 */
export function sellerProjectionConsumer(
  clock: Clock,
  periodSeconds = 0,
): ConsumerOptions<'seller.updated', SettlementDB> {
  return {
    durable: 'settlement-seller-projection',
    subject: 'seller.updated',
    async handler(trx, event) {
      const seller = event.data;
      const minimum = parseUsdc(seller.minimumSettlement);
      const current = await trx
        .selectFrom('sellers')
        .select(['revision', 'settlement_frequency', 'last_scheduled_period'])
        .where('seller_id', '=', seller.sellerId)
        .forUpdate()
        .executeTakeFirst();
      if (current && current.revision >= seller.revision) return;
      const frequencyChanged = !current || current.settlement_frequency !== seller.settlementFrequency;
      const lastScheduled = frequencyChanged
        ? periodAt(seller.settlementFrequency, clock(), periodSeconds).key
        : current.last_scheduled_period;
      await trx
        .insertInto('sellers')
        .values({
          seller_id: seller.sellerId,
          revision: seller.revision,
          payout_address: seller.payoutAddress,
          settlement_frequency: seller.settlementFrequency,
          minimum_settlement_micro: minimum,
          last_scheduled_period: lastScheduled,
        })
        .onConflict((oc) =>
          oc.column('seller_id').doUpdateSet({
            revision: seller.revision,
            payout_address: seller.payoutAddress,
            settlement_frequency: seller.settlementFrequency,
            minimum_settlement_micro: minimum,
            last_scheduled_period: lastScheduled,
            updated_at: new Date(),
          }),
        )
        .execute();
    },
  };
}
