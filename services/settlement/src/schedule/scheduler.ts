import { enqueueEvent } from '@paygate/bus';
import { createEvent } from '@paygate/contracts';
import { formatUsdc } from '@paygate/money';
import { type BackgroundTask, PolledTask, PollingLoop, type ServiceContext } from '@paygate/runtime';
import type { Selectable, Transaction } from 'kysely';
import type { Clock } from '../clock';
import type { SettlementConfig } from '../config';
import type { Frequency, SellersTable, SettlementDB, SettlementsTable } from '../db';
import { type Period, periodAt, settlementIdFor } from './periods';

/**
 * Creates the seller's `pending` settlement of the period (its id derived from both) unless it exists: the new row,
 * or undefined. No conflict target: the id is a second unique key of the same (seller, period), and a concurrent
 * insert met on a unique key that is not the target is a unique violation, not a conflict (both callers lock the
 * seller row first today; the statement does not depend on it).
 */
export function insertSettlement(
  trx: Transaction<SettlementDB>,
  seller: Selectable<SellersTable>,
  period: Period,
  now: Date,
): Promise<Selectable<SettlementsTable> | undefined> {
  return trx
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
      available_micro: null,
      amount_micro: null,
      payout_address: seller.payout_address,
      transfer_id: null,
      tx_hash: null,
      skip_reason: null,
      failure_reason: null,
      created_at: now,
      updated_at: now,
      completed_at: null,
    })
    .onConflict((oc) => oc.doNothing())
    .returningAll()
    .executeTakeFirst();
}

/**
 * `settlement.due` for a pending settlement, in the caller's transaction (the outbox): the ledger decides its
 * payout in a transaction of its own and answers `payout.reserved` or `payout.refused` (ledger/decisions.ts).
 */
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

/**
 * Creates one settlement per seller and period when the period is due, with its `settlement.due` in the same
 * transaction. Nothing here waits for another service: the ledger's decision arrives as an event. Safe with several
 * replicas: due sellers are claimed with FOR UPDATE SKIP LOCKED, settlement ids are deterministic per
 * (seller, period) and unique.
 */
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

  /** One bounded pass; tests call it directly after moving the clock. */
  async runOnce(): Promise<void> {
    await this.createDueSettlements();
  }

  async createDueSettlements(): Promise<number> {
    const now = this.clock();
    const periods: Record<Frequency, Period> = {
      DAILY: this.periodAt('DAILY', now),
      WEEKLY: this.periodAt('WEEKLY', now),
      MONTHLY: this.periodAt('MONTHLY', now),
    };
    let created = 0;
    for (let batch = 0; batch < MAX_SELLER_BATCHES && !this.loop.isStopped; batch++) {
      const claimed = await this.ctx.inTransaction(async (trx) => {
        const sellers = await trx
          .selectFrom('sellers')
          .selectAll()
          .where((eb) =>
            eb.or(
              (Object.keys(periods) as Frequency[]).map((frequency) =>
                eb.and([
                  eb('settlement_frequency', '=', frequency),
                  eb('last_scheduled_period', '<', periods[frequency].key),
                ]),
              ),
            ),
          )
          .orderBy('seller_id')
          .limit(SELLER_BATCH)
          .forUpdate()
          .skipLocked()
          .execute();
        for (const seller of sellers) {
          const period = periods[seller.settlement_frequency];
          const inserted = await insertSettlement(trx, seller, period, now);
          if (inserted) {
            created += 1;
            await enqueueSettlementDue(trx, inserted, now);
          }
          await trx
            .updateTable('sellers')
            .set({ last_scheduled_period: period.key })
            .where('seller_id', '=', seller.seller_id)
            .execute();
        }
        return sellers.length;
      });
      if (claimed < SELLER_BATCH) break;
    }
    return created;
  }
}
