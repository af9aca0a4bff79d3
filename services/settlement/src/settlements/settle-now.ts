import { formatUsdc } from '@paygate/money';
import type { ServiceContext } from '@paygate/runtime';
import type { Selectable, Transaction } from 'kysely';
import type { Clock } from '../clock';
import type { SellersTable, SettlementDB, SettlementsTable } from '../db';
import { SettleNowSkip, type SettleNowSkipReason } from '../reasons';
import { enqueueSettlementDue, insertSettlement, type SettlementScheduler } from '../schedule/scheduler';
import { settlementView } from './routes';

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
 * the seller's row lock (no network call inside it):
 *
 * - no settlement yet this period: created, with its `settlement.due`;
 * - `pending` (asked already, by the scheduler or another call): asked again (the ledger ignores a due whose payout
 *   it already reserved), and reported as `already_settled_this_period` once the ledger reserved it;
 * - `skipped` (below the minimum or nothing available when last decided): pending again with a new `settlement.due`
 *   — it never paid anything, so money that became available later in the period can still go out in this
 *   period's one payout;
 * - `sending`, `completed` or `failed`: this period's payout exists; nothing is asked
 *   (`already_settled_this_period`); money that became available since waits for the next period.
 *
 * Then it waits, bounded by `decisionWaitMs` for all of them together, for the ledger's decisions.
 */
export async function settleNow(
  ctx: ServiceContext<SettlementDB>,
  scheduler: SettlementScheduler,
  clock: Clock,
  selection: { sellerId: string } | { all: true },
  decisionWaitMs: number,
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
  const asked: string[] = [];
  // Settlements another request had asked for already: their payout, if any, is not this call's.
  const askedBefore = new Set<string>();
  for (const sellerId of sellerIds) {
    const outcome = await askSeller(ctx, scheduler, clock, sellerId);
    if (outcome.asked === 'no') skip(result, outcome.settlement, SettleNowSkip.AlreadySettledThisPeriod);
    else asked.push(outcome.settlement.settlement_id);
    if (outcome.asked === 'again') askedBefore.add(outcome.settlement.settlement_id);
  }
  for (const settlement of await waitForDecisions(ctx, asked, decisionWaitMs)) {
    if (settlement.status === 'pending') skip(result, settlement, SettleNowSkip.LedgerUnavailable);
    else if (settlement.status === 'skipped')
      skip(result, settlement, settlement.skip_reason ?? SettleNowSkip.NothingAvailable);
    else if (askedBefore.has(settlement.settlement_id))
      skip(result, settlement, SettleNowSkip.AlreadySettledThisPeriod);
    else result.settled.push(settlementView(settlement));
  }
  return result;
}

function skip(
  result: SettleNowResult,
  settlement: Selectable<SettlementsTable>,
  reason: SettleNowSkipReason,
) {
  result.skipped.push({
    sellerId: settlement.seller_id,
    settlementId: settlement.settlement_id,
    reason,
    status: settlement.status,
    availableAmount: settlement.available_micro === null ? null : formatUsdc(settlement.available_micro),
    txHash: settlement.tx_hash,
  });
}

/** Takes the seller's row lock: concurrent settle-now calls for this seller queue behind it. */
function lockSeller(trx: Transaction<SettlementDB>, sellerId: string): Promise<Selectable<SellersTable>> {
  return trx
    .selectFrom('sellers')
    .selectAll()
    .where('seller_id', '=', sellerId)
    .forUpdate()
    .executeTakeFirstOrThrow();
}

function paidThisPeriod(settlement: Selectable<SettlementsTable>): boolean {
  return (
    settlement.status === 'sending' || settlement.status === 'completed' || settlement.status === 'failed'
  );
}

/** The seller's settlement of this period, asked of the ledger unless it already has its payout. */
async function askSeller(
  ctx: ServiceContext<SettlementDB>,
  scheduler: SettlementScheduler,
  clock: Clock,
  sellerId: string,
): Promise<{ settlement: Selectable<SettlementsTable>; asked: 'now' | 'again' | 'no' }> {
  return ctx.inTransaction(async (trx) => {
    const seller = await lockSeller(trx, sellerId);
    const now = clock();
    const period = scheduler.periodAt(seller.settlement_frequency, now);
    const created = (await insertSettlement(trx, seller, period, now)) !== undefined;
    // This period is scheduled now: the scheduler's pass of this period creates nothing more.
    await trx
      .updateTable('sellers')
      .set({ last_scheduled_period: period.key })
      .where('seller_id', '=', sellerId)
      .where('last_scheduled_period', '<', period.key)
      .execute();
    const settlement = await trx
      .selectFrom('settlements')
      .selectAll()
      .where('seller_id', '=', sellerId)
      .where('period_key', '=', period.key)
      .forUpdate()
      .executeTakeFirstOrThrow();
    if (paidThisPeriod(settlement)) return { settlement, asked: 'no' };
    const askedBefore = settlement.status === 'pending' && !created;
    if (settlement.status === 'skipped') {
      await trx
        .updateTable('settlements')
        .set({ status: 'pending', skip_reason: null, updated_at: now })
        .where('settlement_id', '=', settlement.settlement_id)
        .execute();
    }
    await enqueueSettlementDue(trx, settlement, now);
    return { settlement, asked: askedBefore ? 'again' : 'now' };
  });
}

/** The given settlements once none is `pending` (the ledger decided each), or as they are after `waitMs`. */
async function waitForDecisions(
  ctx: ServiceContext<SettlementDB>,
  settlementIds: string[],
  waitMs: number,
): Promise<Array<Selectable<SettlementsTable>>> {
  return waitForSettlements(ctx, settlementIds, waitMs, 'pending');
}

async function waitForSettlements(
  ctx: ServiceContext<SettlementDB>,
  settlementIds: string[],
  waitMs: number,
  whileStatus: Selectable<SettlementsTable>['status'],
): Promise<Array<Selectable<SettlementsTable>>> {
  if (settlementIds.length === 0) return [];
  const deadline = Date.now() + waitMs;
  for (;;) {
    const rows = await ctx.db
      .selectFrom('settlements')
      .selectAll()
      .where('settlement_id', 'in', settlementIds)
      .orderBy('settlement_id')
      .execute();
    if (rows.every((row) => row.status !== whileStatus) || Date.now() >= deadline) return rows;
    await new Promise((resolve) => setTimeout(resolve, WAIT_POLL_MS));
  }
}

/** Waits (bounded) until the given settlements are no longer `sending`; returns their rows as they are then. */
export async function waitForPayouts(
  ctx: ServiceContext<SettlementDB>,
  settlementIds: string[],
  waitMs: number,
): Promise<Array<Selectable<SettlementsTable>>> {
  return waitForSettlements(ctx, settlementIds, waitMs, 'sending');
}
