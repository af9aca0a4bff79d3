import { type BackgroundTask, PolledTask, PollingLoop, type ServiceContext } from '@paygate/runtime';
import { sql } from 'kysely';
import type { LedgerDeps } from '../deps';
import { cancelReservedPlatformPayout, lockPlatformPayout } from './platform';
import { cancelReservation, lockSettlement, type ReservationRow } from './seller';

/** Reservations cancelled and transactions repaired per sweep, at most. */
const SWEEP_BATCH = 50;

/**
 * The payout-pending check, bounded (SWEEP_BATCH each): every `payout_pending` transaction must belong to a
 * reservation that is still `reserved` and that a payout will send.
 * - a reservation settlement never asked to send (no ledger.authorize_transfer, which it always asks before it
 *   signs) within PAYOUT_UNCLAIMED_AFTER_MS is cancelled: its answer was lost (a crash after the ledger committed
 *   it) and settlement went on under another settlement id, so no payout will ever send it. Cancelled under the
 *   settlement's lock, so an authorization either comes first (and the reservation stays) or is refused after;
 * - a `payout_pending` transaction whose reservation is no longer reserved follows it: `settled` if it completed,
 *   `available` if it was cancelled (the money moved with the reservation's entries; only the status lagged).
 */
export async function sweepPayoutReservations(
  ctx: ServiceContext,
  deps: LedgerDeps,
): Promise<{ cancelled: string[]; repaired: number }> {
  const cancelled = [
    ...(await cancelUnclaimedReservations(ctx, deps)),
    ...(await cancelUnclaimedPlatformPayouts(ctx, deps)),
  ];
  const repaired = await repairStrayPayoutPending(ctx, deps);
  return { cancelled, repaired };
}

/**
 * Platform payouts no ledger.authorize_transfer claimed within PAYOUT_UNCLAIMED_AFTER_MS, cancelled (the operator's
 * request failed after the ledger reserved: the revenue would stay reserved for good); returns their payout ids.
 */
async function cancelUnclaimedPlatformPayouts(ctx: ServiceContext, deps: LedgerDeps): Promise<string[]> {
  const cutoff = new Date(deps.now().getTime() - deps.config.payoutUnclaimedAfterMs);
  const unclaimed = await sql<{ payout_id: string }>`select payout_id from platform_payouts
      where status = 'reserved' and authorized_at is null and created_at < ${cutoff}
      order by created_at limit ${SWEEP_BATCH}`.execute(ctx.db);
  const cancelled: string[] = [];
  for (const { payout_id } of unclaimed.rows) {
    const done = await ctx.inTransaction(async (trx) => {
      await lockPlatformPayout(trx, payout_id);
      const rows = await sql<{ amount_micro: bigint }>`select amount_micro from platform_payouts
          where payout_id = ${payout_id} and status = 'reserved' and authorized_at is null`.execute(trx);
      const payout = rows.rows[0];
      if (!payout) return false;
      await cancelReservedPlatformPayout(trx, deps, payout_id, BigInt(payout.amount_micro));
      return true;
    });
    if (!done) continue;
    cancelled.push(payout_id);
    deps.logger.error(
      { payoutId: payout_id, unclaimedAfterMs: deps.config.payoutUnclaimedAfterMs },
      'platform payout reservation never claimed by a payout; cancelled, the revenue is available again',
    );
  }
  return cancelled;
}

/** Reservations no payout claimed within PAYOUT_UNCLAIMED_AFTER_MS, cancelled; returns their settlement ids. */
async function cancelUnclaimedReservations(ctx: ServiceContext, deps: LedgerDeps): Promise<string[]> {
  const cutoff = new Date(deps.now().getTime() - deps.config.payoutUnclaimedAfterMs);
  const unclaimed = await sql<{ settlement_id: string }>`select settlement_id from payout_reservations
      where status = 'reserved' and authorized_at is null and created_at < ${cutoff}
      order by created_at limit ${SWEEP_BATCH}`.execute(ctx.db);
  const cancelled: string[] = [];
  for (const { settlement_id } of unclaimed.rows) {
    const done = await ctx.inTransaction(async (trx) => {
      await lockSettlement(trx, settlement_id);
      const rows =
        await sql<ReservationRow>`select * from payout_reservations where settlement_id = ${settlement_id}
          and status = 'reserved' and authorized_at is null`.execute(trx);
      const reservation = rows.rows[0];
      if (!reservation) return false;
      await cancelReservation(trx, deps, reservation, 'never claimed by a payout');
      return true;
    });
    if (!done) continue;
    cancelled.push(settlement_id);
    deps.logger.error(
      { settlementId: settlement_id, unclaimedAfterMs: deps.config.payoutUnclaimedAfterMs },
      'payout reservation never claimed by a settlement payout; cancelled, its money is available again',
    );
  }
  return cancelled;
}

/** `payout_pending` transactions whose reservation is no longer reserved, set to its outcome; returns how many. */
async function repairStrayPayoutPending(ctx: ServiceContext, deps: LedgerDeps): Promise<number> {
  const repaired = await sql<{ id: string; settlement_id: string | null; to_status: string }>`
      with stray as (
        select t.id, t.settlement_id, case when r.status = 'completed' then 'settled' else 'available' end as to_status
          from transactions t left join payout_reservations r on r.settlement_id = t.settlement_id
          where t.escrow_status = 'payout_pending' and (r.settlement_id is null or r.status <> 'reserved')
          limit ${SWEEP_BATCH}
          for update of t skip locked
      )
      update transactions t set escrow_status = stray.to_status,
          settlement_id = case when stray.to_status = 'settled' then t.settlement_id else null end,
          settled_at = case when stray.to_status = 'settled' then ${deps.now()}::timestamptz else t.settled_at end
        from stray where t.id = stray.id
        returning t.id, stray.settlement_id, stray.to_status`.execute(ctx.db);
  if (repaired.rows.length > 0) {
    deps.logger.error(
      { transactions: repaired.rows.slice(0, 10) },
      'payout_pending transactions without a reserved payout; set to their reservation’s outcome',
    );
  }
  return repaired.rows.length;
}
/** Runs sweepPayoutReservations every PAYOUT_SWEEP_INTERVAL_MS. */
export class PayoutSweep extends PolledTask implements BackgroundTask {
  protected readonly loop: PollingLoop;

  constructor(
    private readonly ctx: ServiceContext,
    private readonly deps: LedgerDeps,
  ) {
    super();
    const intervalMs = deps.config.payoutSweepIntervalMs;
    this.loop = new PollingLoop(
      async () => {
        await sweepPayoutReservations(this.ctx, this.deps);
      },
      { what: 'payout reservation sweep', logger: ctx.logger, intervalMs, firstDelayMs: intervalMs },
    );
  }
}
