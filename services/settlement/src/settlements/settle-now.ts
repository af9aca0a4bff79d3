import { formatUsdc } from '@paygate/money';
import type { ServiceContext } from '@paygate/runtime';
import type { Static } from '@sinclair/typebox';
import type { Selectable } from 'kysely';
import type { Clock } from '../clock';
import type { SettlementDB, SettlementsTable } from '../db';
import { HAS_PAYOUT } from '../ledger/decisions';
import { SettleNowSkip, type SettleNowSkipReason } from '../reasons';
import { enqueueSettlementDue, type SettlementScheduler, schedulePeriod } from '../schedule/scheduler';
import { settlementView } from './routes';
import type { SettleNowAnswer } from './schemas';

export type SettleNowResult = Static<typeof SettleNowAnswer>;
type SettlementRow = Selectable<SettlementsTable>;

const MAX_SELLERS = 2000;
const WAIT_POLL_MS = 200;

/** Settles sellers now through the scheduler's row of this period (askSeller), then waits, bounded, for the ledger. */
export async function settleNow(
  ctx: ServiceContext<SettlementDB>,
  scheduler: SettlementScheduler,
  clock: Clock,
  selection: { sellerId: string } | { all: true },
  decisionWaitMs: number,
): Promise<SettleNowResult | null> {
  const onlySeller = 'sellerId' in selection ? selection.sellerId : undefined;
  const rows = await ctx.db
    .selectFrom('sellers')
    .select('seller_id')
    .$if(onlySeller !== undefined, (query) => query.where('seller_id', '=', onlySeller!))
    .orderBy('seller_id')
    .limit(MAX_SELLERS)
    .execute();
  if (onlySeller !== undefined && rows.length === 0) return null;
  const sellerIds = rows.map((row) => row.seller_id);
  const result: SettleNowResult = { settled: [], skipped: [], truncated: sellerIds.length >= MAX_SELLERS };
  const asked: string[] = [];
  // Settlements another request had asked for already: their payout, if any, is not this call's.
  const askedBefore = new Set<string>();
  for (const sellerId of sellerIds) {
    const outcome = await askSeller(ctx, scheduler, clock, sellerId);
    if (outcome.asked === 'no') skip(result, outcome.settlement, SettleNowSkip.AlreadySettledThisPeriod);
    else asked.push(outcome.settlement.settlement_id);
    if (outcome.asked === 'again') askedBefore.add(outcome.settlement.settlement_id);
  }
  for (const settlement of await waitForSettlements(ctx, asked, decisionWaitMs, 'pending')) {
    if (settlement.status === 'pending') skip(result, settlement, SettleNowSkip.LedgerUnavailable);
    else if (settlement.status === 'skipped')
      skip(result, settlement, settlement.skip_reason ?? SettleNowSkip.NothingAvailable);
    else if (askedBefore.has(settlement.settlement_id))
      skip(result, settlement, SettleNowSkip.AlreadySettledThisPeriod);
    else result.settled.push(settlementView(settlement));
  }
  return result;
}

function skip(result: SettleNowResult, settlement: SettlementRow, reason: SettleNowSkipReason) {
  result.skipped.push({
    sellerId: settlement.seller_id,
    settlementId: settlement.settlement_id,
    reason,
    status: settlement.status,
    availableAmount: settlement.available_micro === null ? null : formatUsdc(settlement.available_micro),
    txHash: settlement.tx_hash,
  });
}

/** The seller's settlement of this period, asked of the ledger unless it already has its payout. */
async function askSeller(
  ctx: ServiceContext<SettlementDB>,
  scheduler: SettlementScheduler,
  clock: Clock,
  sellerId: string,
): Promise<{ settlement: SettlementRow; asked: 'now' | 'again' | 'no' }> {
  return ctx.inTransaction(async (trx) => {
    // The seller's row lock: concurrent settle-now calls for this seller queue behind it.
    const seller = await trx
      .selectFrom('sellers')
      .selectAll()
      .where('seller_id', '=', sellerId)
      .forUpdate()
      .executeTakeFirstOrThrow();
    const now = clock();
    const period = scheduler.periodAt(seller.settlement_frequency, now);
    const created = (await schedulePeriod(trx, seller, period, now)) !== undefined;
    const settlement = await trx
      .selectFrom('settlements')
      .selectAll()
      .where('seller_id', '=', sellerId)
      .where('period_key', '=', period.key)
      .forUpdate()
      .executeTakeFirstOrThrow();
    if (HAS_PAYOUT.includes(settlement.status)) return { settlement, asked: 'no' };
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

/** The given settlements once none is `whileStatus`, or as they are after `waitMs`. */
export async function waitForSettlements(
  ctx: ServiceContext<SettlementDB>,
  settlementIds: string[],
  waitMs: number,
  whileStatus: SettlementRow['status'],
): Promise<SettlementRow[]> {
  if (settlementIds.length === 0) return [];
  const deadline = Date.now() + waitMs;
  const read = () =>
    ctx.db
      .selectFrom('settlements')
      .selectAll()
      .where('settlement_id', 'in', settlementIds)
      .orderBy('settlement_id')
      .execute();
  return readUntil(await read(), read, (rows) => rows.every((row) => row.status !== whileStatus), deadline);
}

/** `read` again every WAIT_POLL_MS from `first` until `done` says so or `deadline` passed: the last read. */
export async function readUntil<T>(
  first: T,
  read: () => Promise<T>,
  done: (value: T) => boolean,
  deadline: number,
): Promise<T> {
  let value = first;
  while (!done(value) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, WAIT_POLL_MS));
    value = await read();
  }
  return value;
}
