import { enqueueEvent } from '@paygate/bus';
import { createEvent } from '@paygate/contracts';
import { formatUsdc } from '@paygate/money';
import { type BackgroundTask, PolledTask, PollingLoop, type ServiceContext } from '@paygate/runtime';
import type { ExpressionBuilder, Selectable, Transaction } from 'kysely';
import type { Clock } from '../clock';
import type { SettlementConfig } from '../config';
import {
  FREQUENCIES,
  type Frequency,
  type SellersTable,
  type SettlementDB,
  type SettlementsTable,
} from '../db';
import { type Period, periodAt, settlementIdFor } from './periods';

/**
 * The seller's new `pending` settlement of `period` (undefined when it has one: no conflict target, the id is a
 * second unique key), the period marked scheduled in the same transaction so no pass creates another.
 */
export async function schedulePeriod(
  trx: Transaction<SettlementDB>,
  seller: Selectable<SellersTable>,
  period: Period,
  now: Date,
): Promise<Selectable<SettlementsTable> | undefined> {
  const inserted = await trx
    .insertInto('settlements')
    .values({
      settlement_id: settlementIdFor(seller.seller_id, period),
      seller_id: seller.seller_id,
      period_key: period.key,
      frequency: period.frequency,
      period_start: period.start,
      period_end: period.end,
      status: 'pending',
      minimum_micro: seller.minimum_settlement_micro,
      payout_address: seller.payout_address,
      created_at: now,
      updated_at: now,
    })
    .onConflict((oc) => oc.doNothing())
    .returningAll()
    .executeTakeFirst();
  await trx
    .updateTable('sellers')
    .set({ last_scheduled_period: period.key })
    .where('seller_id', '=', seller.seller_id)
    .where('last_scheduled_period', '<', period.key)
    .execute();
  return inserted;
}

/** `settlement.due` in the caller's transaction: the ledger answers `payout.reserved` or `payout.refused`. */
export async function enqueueSettlementDue(
  trx: Transaction<SettlementDB>,
  settlement: Pick<Selectable<SettlementsTable>, 'settlement_id' | 'seller_id' | 'minimum_micro'>,
  now: Date,
): Promise<void> {
  await enqueueEvent(
    trx,
    createEvent('settlement.due', 'settlement', {
      settlementId: settlement.settlement_id,
      sellerId: settlement.seller_id,
      minimumAmount: formatUsdc(settlement.minimum_micro),
      dueAt: now.toISOString(),
    }),
  );
}

const SELLER_BATCH = 100;
const MAX_SELLER_BATCHES = 20;

/** Sellers whose period among `periods` is not scheduled yet. */
export function unscheduledIn(periods: readonly Period[]) {
  return (eb: ExpressionBuilder<SettlementDB, 'sellers'>) =>
    eb.or(
      periods.map((period) =>
        eb.and([
          eb('settlement_frequency', '=', period.frequency),
          eb('last_scheduled_period', '<', period.key),
        ]),
      ),
    );
}

/** One settlement per seller and due period, with its `settlement.due`; replicas claim sellers SKIP LOCKED. */
export class SettlementScheduler extends PolledTask implements BackgroundTask {
  protected readonly loop: PollingLoop;

  constructor(
    private readonly ctx: ServiceContext<SettlementDB>,
    private readonly config: SettlementConfig,
    private readonly clock: Clock,
  ) {
    super();
    this.loop = new PollingLoop(() => this.runOnce(), {
      what: 'settlement scheduler pass',
      logger: ctx.logger,
      intervalMs: config.schedulerIntervalMs,
    });
  }

  /** The seller's period at `at` (the development SETTLEMENT_PERIOD_SECONDS replaces the real ones). */
  periodAt(frequency: Frequency, at: Date): Period {
    return periodAt(frequency, at, this.config.settlementPeriodSeconds);
  }

  async runOnce(): Promise<void> {
    const now = this.clock();
    const periods = {} as Record<Frequency, Period>;
    for (const frequency of FREQUENCIES) periods[frequency] = this.periodAt(frequency, now);
    for (let batch = 0; batch < MAX_SELLER_BATCHES && !this.loop.isStopped; batch++) {
      const claimed = await this.ctx.inTransaction(async (trx) => {
        const sellers = await trx
          .selectFrom('sellers')
          .selectAll()
          .where(unscheduledIn(Object.values(periods)))
          .orderBy('seller_id')
          .limit(SELLER_BATCH)
          .forUpdate()
          .skipLocked()
          .execute();
        for (const seller of sellers) {
          const period = periods[seller.settlement_frequency];
          const inserted = await schedulePeriod(trx, seller, period, now);
          if (inserted) await enqueueSettlementDue(trx, inserted, now);
        }
        return sellers.length;
      });
      if (claimed < SELLER_BATCH) break;
    }
  }
}
