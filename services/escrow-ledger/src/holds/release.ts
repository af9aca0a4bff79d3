import { enqueueEvent } from '@paygate/bus';
import { createEvent } from '@paygate/contracts';
import { formatUsdc } from '@paygate/money';
import { type BackgroundTask, PolledTask, PollingLoop, type ServiceContext } from '@paygate/runtime';
import { sql } from 'kysely';
import type { LedgerDeps } from '../deps';
import { credit, debit, ensureAccounts, postEntry } from '../ledger/entries';

interface DueHold {
  id: string;
  seller_id: string;
  seller_share_micro: bigint;
  platform_share_micro: bigint;
  refunded_seller_micro: bigint;
  refunded_platform_micro: bigint;
}

/**
 * Releases up to `limit` holds whose hold period has passed (by the injected clock): the unrefunded seller
 * share moves to the seller's available balance, the platform share to platform revenue, and escrow.released
 * is published. A payment whose transfer the chain has not confirmed yet stays held, however long that takes (an
 * unreachable chain stops payouts of unconfirmed money, never pays it: see ChainConfirmationCheck). A payment whose buyer asked for a refund stays held until the seller decides the request (the
 * next pass after the decision releases what remains). Rows are claimed with FOR UPDATE SKIP LOCKED, so any number of replicas can run this at once.
 * Returns how many holds were released.
 */
export async function releaseDueHolds(ctx: ServiceContext, deps: LedgerDeps, limit: number): Promise<number> {
  const now = deps.now();
  const holdBack = deps.config.chainConfirmTimeoutMs > 0;
  return ctx.inTransaction(async (trx) => {
    const due =
      await sql<DueHold>`select id, seller_id, seller_share_micro, platform_share_micro, refunded_seller_micro,
          refunded_platform_micro
        from transactions where escrow_status = 'held' and hold_until <= ${now}
          and not exists (select 1 from refund_requests rr where rr.transaction_id = transactions.id
            and rr.status = 'pending')
          -- Not payable before the chain confirmed its transfer (booked at inclusion, a reorg may still drop it).
          and (${holdBack} = false or not exists (select 1 from transfers tr
            where tr.chain_id = transactions.chain_id and tr.tx_hash = transactions.tx_hash
              and tr.log_index = transactions.log_index
              and tr.chain_confirmed_at is null))
        order by hold_until limit ${limit} for update skip locked`.execute(trx);
    // Every account the batch posts to exists before the first entry locks balance rows (see ensureAccounts).
    await ensureAccounts(
      trx,
      due.rows.flatMap((hold) => [
        ['seller_held', hold.seller_id] as const,
        ['seller_available', hold.seller_id] as const,
        ['platform_held', ''] as const,
        ['platform_revenue', ''] as const,
      ]),
    );
    for (const hold of due.rows) {
      const sellerMicro = hold.seller_share_micro - hold.refunded_seller_micro;
      const platformMicro = hold.platform_share_micro - hold.refunded_platform_micro;
      await postEntry(trx, {
        idempotencyKey: `release:${hold.id}`,
        entryType: 'release',
        transactionId: hold.id,
        lines: [
          debit('seller_held', sellerMicro, hold.seller_id),
          credit('seller_available', sellerMicro, hold.seller_id),
          debit('platform_held', platformMicro),
          credit('platform_revenue', platformMicro),
        ],
      });
      await sql`update transactions set escrow_status = 'available', released_at = ${now} where id = ${hold.id}`.execute(
        trx,
      );
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
    deps.metrics.holdsReleased.inc(due.rows.length);
    return due.rows.length;
  });
}

/** Runs releaseDueHolds every `releaseIntervalMs`, a bounded number of batches per pass. */
export class ReleaseScheduler extends PolledTask implements BackgroundTask {
  protected readonly loop: PollingLoop;

  constructor(
    private readonly ctx: ServiceContext,
    private readonly deps: LedgerDeps,
  ) {
    super();
    const intervalMs = deps.config.releaseIntervalMs;
    this.loop = new PollingLoop(
      async () => {
        await this.releaseBatches();
      },
      {
        what: 'hold release pass',
        logger: ctx.logger,
        intervalMs,
        firstDelayMs: intervalMs,
      },
    );
  }

  /** One pass now, beside the loop's (tests): returns how many holds were released. */
  tick(): Promise<number> {
    return this.releaseBatches();
  }

  /** Releases due holds in batches until none is left, the per-pass bound is reached or the loop stops. */
  private async releaseBatches(): Promise<number> {
    let total = 0;
    for (let batch = 0; batch < 20 && !this.loop.isStopped; batch++) {
      const released = await releaseDueHolds(this.ctx, this.deps, this.deps.config.releaseBatchSize);
      total += released;
      if (released < this.deps.config.releaseBatchSize) break;
    }
    return total;
  }
}
