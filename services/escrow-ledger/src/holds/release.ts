import { enqueueEvent } from '@paygate/bus';
import { createEvent } from '@paygate/contracts';
import { formatUsdc } from '@paygate/money';
import { type BackgroundTask, PolledTask, PollingLoop } from '@paygate/runtime';
import { sql } from 'kysely';
import type { TransactionRow } from '../db';
import type { LedgerContext, LedgerDeps } from '../deps';
import { credit, debit, postEntries } from '../ledger/entries';
import { notAwaitingUnservedDecision } from '../unserved/holds';

/**
 * Releases up to `limit` holds past their period: the unrefunded seller share to seller_available, the platform
 * share to platform_revenue, escrow.released. Still held: a payment whose transfer the chain has not confirmed
 * (an unreachable chain stops payouts of unconfirmed money, never pays it), or with a pending buyer refund request
 * (until the seller decides). SKIP LOCKED, so replicas run it at once. Returns how many were released.
 */
export async function releaseDueHolds(ctx: LedgerContext, deps: LedgerDeps, limit: number): Promise<number> {
  const now = deps.now();
  const holdBack = deps.config.chainConfirmTimeoutMs > 0;
  return ctx.inTransaction(async (trx) => {
    const due =
      await sql<TransactionRow>`select * from transactions where escrow_status = 'held' and hold_until <= ${now}
          and not exists (select 1 from refund_requests rr where rr.transaction_id = transactions.id
            and rr.status = 'pending')
          -- A call its seller failed: held while its buyer may retry and until its refund is decided.
          and ${notAwaitingUnservedDecision('transactions', now)}
          -- Not payable before the chain confirmed its transfer (booked at inclusion, a reorg may still drop it).
          and (${holdBack} = false or not exists (select 1 from transfers tr
            where tr.chain_id = transactions.chain_id and tr.tx_hash = transactions.tx_hash
              and tr.log_index = transactions.log_index
              and tr.chain_confirmed_at is null))
        order by hold_until limit ${limit} for update skip locked`.execute(trx);
    if (due.rows.length === 0) return 0;
    const dueIds = due.rows.map((hold) => hold.id);
    const released = due.rows.map((hold) => ({
      hold,
      sellerMicro: hold.seller_share_micro - hold.refunded_seller_micro,
      platformMicro: hold.platform_share_micro - hold.refunded_platform_micro,
    }));
    await trx
      .updateTable('transactions')
      .set({ escrow_status: 'available', released_at: now })
      .where('id', 'in', dueIds)
      .execute();
    for (const { hold, sellerMicro } of released) {
      await enqueueEvent(
        trx,
        createEvent('escrow.released', 'escrow-ledger', {
          transactionId: hold.id,
          sellerId: hold.seller_id,
          amount: formatUsdc(sellerMicro),
          releasedAt: now.toISOString(),
        }),
      );
    }
    // Last, in one statement: every booking credits platform_held, so the batch holds that row only from here to the
    // commit. post_entries creates missing accounts first, in its global order; nothing before it locks a balance.
    await postEntries(
      trx,
      released.map(({ hold, sellerMicro, platformMicro }) => ({
        idempotencyKey: `release:${hold.id}`,
        entryType: 'release',
        transactionId: hold.id,
        lines: [
          debit('seller_held', sellerMicro, hold.seller_id),
          credit('seller_available', sellerMicro, hold.seller_id),
          debit('platform_held', platformMicro),
          credit('platform_revenue', platformMicro),
        ],
      })),
    );
    deps.metrics.holdsReleased.inc(due.rows.length);
    return due.rows.length;
  });
}

/**
 * Seconds the oldest due hold has waited (0: none), by what it waits for: `release` (its transfer is confirmed, only
 * a pass stands between it and the seller) or `chain`. Not those a pending buyer refund request holds.
 */
async function dueHoldAges(ctx: LedgerContext, deps: LedgerDeps) {
  const now = deps.now();
  const rows = await sql<{ waiting: 'release' | 'chain'; oldest: Date | null }>`select
        case when exists (select 1 from transfers tr
            where tr.chain_id = t.chain_id and tr.tx_hash = t.tx_hash and tr.log_index = t.log_index
              and tr.chain_confirmed_at is null) then 'chain' else 'release' end as waiting,
        min(t.hold_until) as oldest
      from transactions t
      where t.escrow_status = 'held' and t.hold_until <= ${now}
        and not exists (select 1 from refund_requests rr where rr.transaction_id = t.id and rr.status = 'pending')
        and ${notAwaitingUnservedDecision('t', now)}
      group by 1`.execute(ctx.db);
  const ageOf = (waiting: 'release' | 'chain') => {
    const oldest = rows.rows.find((r) => r.waiting === waiting)?.oldest;
    return oldest ? Math.max(0, (now.getTime() - new Date(oldest).getTime()) / 1000) : 0;
  };
  const holdBack = deps.config.chainConfirmTimeoutMs > 0;
  // Without the hold-back an unconfirmed transfer does not keep its hold from release.
  const chain = ageOf('chain');
  return holdBack
    ? { releaseSeconds: ageOf('release'), chainSeconds: chain }
    : { releaseSeconds: Math.max(ageOf('release'), chain), chainSeconds: 0 };
}

/** releaseDueHolds every RELEASE_INTERVAL_MS and when the chain check kicks it, then the due holds' gauge and alert. */
export class ReleaseScheduler extends PolledTask implements BackgroundTask {
  protected readonly loop: PollingLoop;
  private static readonly BATCHES_PER_PASS = 20;

  constructor(
    private readonly ctx: LedgerContext,
    private readonly deps: LedgerDeps,
  ) {
    super();
    const intervalMs = deps.config.releaseIntervalMs;
    this.loop = new PollingLoop(
      async () => {
        const { more } = await this.releaseBatches();
        await this.reportDue();
        return more;
      },
      {
        what: 'hold release pass',
        logger: ctx.logger,
        intervalMs,
        firstDelayMs: intervalMs,
      },
    );
  }

  /** Resolves once a loop pass started after this call ended (tests): it cannot miss a hold a kicked pass locks. */
  passSoon(): Promise<void> {
    return this.loop.runSoon();
  }

  /** One pass now, beside the loop's (tests): returns how many holds were released. */
  async tick(): Promise<number> {
    const { released } = await this.releaseBatches();
    await this.reportDue();
    return released;
  }

  private async releaseBatches(): Promise<{ released: number; more: boolean }> {
    let total = 0;
    const batchSize = this.deps.config.releaseBatchSize;
    for (let batch = 0; batch < ReleaseScheduler.BATCHES_PER_PASS && !this.loop.isStopped; batch++) {
      const released = await releaseDueHolds(this.ctx, this.deps, batchSize);
      total += released;
      if (released < batchSize) return { released: total, more: false };
    }
    return { released: total, more: !this.loop.isStopped };
  }

  private async reportDue(): Promise<void> {
    const ages = await dueHoldAges(this.ctx, this.deps);
    this.deps.metrics.holdsDueOldest.set({ waiting: 'release' }, ages.releaseSeconds);
    this.deps.metrics.holdsDueOldest.set({ waiting: 'chain' }, ages.chainSeconds);
    const boundMs = this.deps.config.releaseBoundMs;
    if (ages.releaseSeconds * 1000 > boundMs) {
      this.ctx.logger.error(
        { oldestDueSeconds: ages.releaseSeconds, releaseBoundMs: boundMs },
        'a due hold of a confirmed payment is still not released past RELEASE_BOUND_MS',
      );
    }
  }
}
