import { formatUsdc } from '@paygate/money';
import type { ServiceContext } from '@paygate/runtime';
import type { Selectable, Transaction } from 'kysely';
import type { Clock } from '../clock';
import type { SellersTable, SettlementDB, SettlementsTable } from '../db';
import type { Period } from '../schedule/periods';
import { newSettlementRow, type SettlementScheduler } from '../schedule/scheduler';
import { settlementView } from './routes';

/** Why settle-now paid nothing to a seller. */
export type SettleNowSkipReason =
  /** the ledger's available balance is below the seller's minimum settlement amount */
  | 'below_minimum'
  /** nothing (or less than nothing: a refund after settlement) is available */
  | 'nothing_available'
  /** the ledger gave this settlement's reservation back (its answer was lost): the money waits for the next period */
  | 'reservation_cancelled'
  /** this period already has a payout (sending, completed or failed): one payout per seller and period */
  | 'already_settled_this_period'
  /** the ledger did not answer; the settlement stays pending and the scheduler retries it */
  | 'ledger_unavailable';

export interface SettleNowResult {
  settled: Array<ReturnType<typeof settlementView>>;
  skipped: Array<{
    sellerId: string;
    settlementId: string;
    reason: SettleNowSkipReason;
    status: Selectable<SettlementsTable>['status'];
    availableAmount: string | null;
    txHash: string | null;
  }>;
  /** true when `all` stopped at the bound (MAX_SELLERS); run it again for the rest. */
  truncated: boolean;
}

const SELLER_BATCH = 100;
const MAX_SELLERS = 2000;
const WAIT_POLL_MS = 200;

/**
 * Settles sellers at once, in the period the scheduler would use now, through the same settlement row: its id is
 * derived from (seller, period) and (seller_id, period_key) is unique, so settle-now and the scheduled pass of the
 * same period — or two settle-now calls at once — never make two payouts. Per seller, in one transaction holding
 * the seller's row lock (concurrent calls queue behind it; the scheduler's SKIP LOCKED passes go around it):
 *
 * - no settlement yet this period: created and reserved now; the scheduled pass of this period then finds the
 *   period already scheduled and does nothing;
 * - `pending` (created by the scheduler, not reserved yet): reserved now;
 * - `skipped` (below the minimum or nothing available when last asked): asked again — it never paid anything, so
 *   money that became available later in the period can still go out in this period's one payout;
 * - `sending`, `completed` or `failed`: this period's payout exists; nothing is sent
 *   (`already_settled_this_period`); money that became available since waits for the next period.
 */
export async function settleNow(
  ctx: ServiceContext<SettlementDB>,
  scheduler: SettlementScheduler,
  clock: Clock,
  selection: { sellerId: string } | { all: true },
  onTransferRecorded: () => void,
): Promise<SettleNowResult | null> {
  const result: SettleNowResult = { settled: [], skipped: [], truncated: false };
  let sellerIds: string[];
  if ('sellerId' in selection) {
    const found = await ctx.db
      .selectFrom('sellers')
      .select('seller_id')
      .where('seller_id', '=', selection.sellerId)
      .executeTakeFirst();
    if (!found) return null;
    sellerIds = [found.seller_id];
  } else {
    sellerIds = [];
    let after = '';
    while (sellerIds.length < MAX_SELLERS) {
      const batch = await ctx.db
        .selectFrom('sellers')
        .select('seller_id')
        .where('seller_id', '>', after)
        .orderBy('seller_id')
        .limit(SELLER_BATCH)
        .execute();
      sellerIds.push(...batch.map((row) => row.seller_id));
      if (batch.length < SELLER_BATCH) break;
      after = batch[batch.length - 1]!.seller_id;
    }
    result.truncated = sellerIds.length >= MAX_SELLERS;
  }
  for (const sellerId of sellerIds) {
    const outcome = await settleSeller(ctx, scheduler, clock, sellerId);
    if (outcome.recorded) {
      onTransferRecorded();
      await scheduler.acknowledgeRecorded([outcome.settlement.settlement_id]);
    }
    if (outcome.reason === null) result.settled.push(settlementView(outcome.settlement));
    else {
      result.skipped.push({
        sellerId,
        settlementId: outcome.settlement.settlement_id,
        reason: outcome.reason,
        status: outcome.settlement.status,
        availableAmount:
          outcome.settlement.available_micro === null ? null : formatUsdc(outcome.settlement.available_micro),
        txHash: outcome.settlement.tx_hash,
      });
    }
  }
  return result;
}

type SettleSellerOutcome = {
  settlement: Selectable<SettlementsTable>;
  reason: SettleNowSkipReason | null;
  recorded: boolean;
};

/** Takes the seller's row lock: concurrent settle-now calls for this seller queue behind it. */
function lockSeller(trx: Transaction<SettlementDB>, sellerId: string): Promise<Selectable<SellersTable>> {
  return trx
    .selectFrom('sellers')
    .selectAll()
    .where('seller_id', '=', sellerId)
    .forUpdate()
    .executeTakeFirstOrThrow();
}

/** Creates the seller's settlement of the period unless it exists ((seller_id, period_key) is unique). */
async function ensurePeriodSettlement(
  trx: Transaction<SettlementDB>,
  seller: Selectable<SellersTable>,
  period: Period,
  now: Date,
): Promise<void> {
  await trx
    .insertInto('settlements')
    .values(newSettlementRow(seller, period, now))
    .onConflict((oc) => oc.columns(['seller_id', 'period_key']).doNothing())
    .execute();
}

// This period is scheduled now: the scheduler's pass of this period creates nothing more.
async function markPeriodScheduled(
  trx: Transaction<SettlementDB>,
  sellerId: string,
  periodKey: string,
): Promise<void> {
  await trx
    .updateTable('sellers')
    .set({ last_scheduled_period: periodKey })
    .where('seller_id', '=', sellerId)
    .where('last_scheduled_period', '<', periodKey)
    .execute();
}

function lockPeriodSettlement(
  trx: Transaction<SettlementDB>,
  sellerId: string,
  periodKey: string,
): Promise<Selectable<SettlementsTable>> {
  return trx
    .selectFrom('settlements')
    .selectAll()
    .where('seller_id', '=', sellerId)
    .where('period_key', '=', periodKey)
    .forUpdate()
    .executeTakeFirstOrThrow();
}

// Nothing was paid in this period: ask the ledger again (it re-evaluates a refused reservation).
async function reopenSkippedSettlement(
  trx: Transaction<SettlementDB>,
  settlementId: string,
  now: Date,
): Promise<void> {
  await trx
    .updateTable('settlements')
    .set({ status: 'pending', skip_reason: null, updated_at: now })
    .where('settlement_id', '=', settlementId)
    .execute();
}

function paidThisPeriod(settlement: Selectable<SettlementsTable>): boolean {
  return (
    settlement.status === 'sending' || settlement.status === 'completed' || settlement.status === 'failed'
  );
}

function reservationOutcome(
  outcome: 'recorded' | 'skipped' | 'retry',
  settlement: Selectable<SettlementsTable>,
): SettleSellerOutcome {
  if (outcome === 'recorded') return { settlement, reason: null, recorded: true };
  if (outcome === 'retry') return { settlement, reason: 'ledger_unavailable', recorded: false };
  return { settlement, reason: settlement.skip_reason ?? 'nothing_available', recorded: false };
}

async function settleSeller(
  ctx: ServiceContext<SettlementDB>,
  scheduler: SettlementScheduler,
  clock: Clock,
  sellerId: string,
): Promise<SettleSellerOutcome> {
  // The settlement row is committed before the ledger is asked: if the reservation's answer is lost (a crash or
  // a terminated connection after the ledger committed it), the row stays `pending` and is asked again under the
  // same id (the ledger answers its stored reservation), never under the next period's id, which would leave the
  // first reservation holding the seller's money with no settlement to send it.
  await ctx.inTransaction(async (trx) => {
    const seller = await lockSeller(trx, sellerId);
    await ensurePeriodSettlement(
      trx,
      seller,
      scheduler.periodAt(seller.settlement_frequency, clock()),
      clock(),
    );
  });
  return ctx.inTransaction(async (trx) => {
    const seller = await lockSeller(trx, sellerId);
    const now = clock();
    const period = scheduler.periodAt(seller.settlement_frequency, now);
    await ensurePeriodSettlement(trx, seller, period, now);
    await markPeriodScheduled(trx, sellerId, period.key);
    let settlement = await lockPeriodSettlement(trx, sellerId, period.key);
    if (paidThisPeriod(settlement)) {
      return { settlement, reason: 'already_settled_this_period', recorded: false };
    }
    if (settlement.status === 'skipped') {
      await reopenSkippedSettlement(trx, settlement.settlement_id, now);
      settlement = await lockPeriodSettlement(trx, sellerId, period.key);
    }
    const outcome = await scheduler.reserve(trx, settlement);
    return reservationOutcome(outcome, await lockPeriodSettlement(trx, sellerId, period.key));
  });
}

/** Waits (bounded) until the given settlements are no longer `sending`; returns their rows as they are then. */
export async function waitForPayouts(
  ctx: ServiceContext<SettlementDB>,
  settlementIds: string[],
  waitMs: number,
): Promise<Array<Selectable<SettlementsTable>>> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const rows =
      settlementIds.length === 0
        ? []
        : await ctx.db
            .selectFrom('settlements')
            .selectAll()
            .where('settlement_id', 'in', settlementIds)
            .orderBy('settlement_id')
            .execute();
    if (rows.every((row) => row.status !== 'sending') || Date.now() >= deadline) return rows;
    await new Promise((resolve) => setTimeout(resolve, WAIT_POLL_MS));
  }
}
