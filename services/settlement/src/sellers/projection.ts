import type { ConsumerOptions } from '@paygate/bus';
import { parseUsdc } from '@paygate/money';
import type { Clock } from '../clock';
import type { SettlementDB } from '../db';
import { periodAt } from '../schedule/periods';

/** `seller.updated` (newer revisions only); a new frequency is first settled at the start of its next period. */
export function sellerProjectionConsumer(
  clock: Clock,
  periodSeconds = 0,
): ConsumerOptions<'seller.updated', SettlementDB> {
  return {
    durable: 'settlement-seller-projection',
    subject: 'seller.updated',
    async handler(trx, event) {
      const seller = event.data;
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
      const columns = {
        revision: seller.revision,
        payout_address: seller.payoutAddress,
        settlement_frequency: seller.settlementFrequency,
        minimum_settlement_micro: parseUsdc(seller.minimumSettlement),
        last_scheduled_period: lastScheduled,
      };
      await trx
        .insertInto('sellers')
        .values({ seller_id: seller.sellerId, ...columns })
        .onConflict((oc) => oc.column('seller_id').doUpdateSet({ ...columns, updated_at: new Date() }))
        .execute();
    },
  };
}
