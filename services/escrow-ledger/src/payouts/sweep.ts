import { type BackgroundTask, PolledTask, PollingLoop, type ServiceContext } from '@paygate/runtime';
import { sql, type Transaction } from 'kysely';
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
 *   a platform payout reservation likewise (the operator's request died after the ledger reserved);
 * - a `payout_pending` transaction whose reservation is no longer reserved follows it: `settled` if it completed,
 *   `available` if it was cancelled (the money moved with the reservation's entries; only the status lagged).
 */
export async function sweepPayoutReservations(
  ctx: ServiceContext,
  deps: LedgerDeps,
): Promise<{ cancelled: string[]; repaired: number }> {
  const cancelled = [
    ...(await cancelUnclaimed(ctx, deps, SELLER_PAYOUTS)),
    ...(await cancelUnclaimed(ctx, deps, PLATFORM_PAYOUTS)),
  ];
  const repaired = await repairStrayPayoutPending(ctx, deps);
  return { cancelled, repaired };
}

/** A kind of payout reservation the sweep gives back: where it is, its lock, and how it is cancelled. */
interface UnclaimedKind<Row> {
  table: 'payout_reservations' | 'platform_payouts';
  idColumn: 'settlement_id' | 'payout_id';
  /** Rows still reserved that no payout claimed. */
  unclaimedOnly: ReturnType<typeof sql>;
  lock(trx: Transaction<any>, id: string): Promise<unknown>;
  cancel(trx: Transaction<any>, deps: LedgerDeps, row: Row): Promise<void>;
  cancelledMessage: string;
}

const SELLER_PAYOUTS: UnclaimedKind<ReservationRow> = {
  table: 'payout_reservations',
  idColumn: 'settlement_id',
  // Recorded by settlement (recorded_at): its payout may wait behind others to be signed; that is no lost answer.
  unclaimedOnly: sql`status = 'reserved' and authorized_at is null and recorded_at is null`,
  lock: lockSettlement,
  cancel: (trx, deps, reservation) => cancelReservation(trx, deps, reservation, 'never claimed by a payout'),
  cancelledMessage:
    'payout reservation never claimed by a settlement payout; cancelled, its money is available again',
};

const PLATFORM_PAYOUTS: UnclaimedKind<{ payout_id: string; amount_micro: bigint }> = {
  table: 'platform_payouts',
  idColumn: 'payout_id',
  unclaimedOnly: sql`status = 'reserved' and authorized_at is null`,
  lock: lockPlatformPayout,
  cancel: (trx, deps, payout) =>
    cancelReservedPlatformPayout(trx, deps, payout.payout_id, BigInt(payout.amount_micro)),
  cancelledMessage:
    'platform payout reservation never claimed by a payout; cancelled, the revenue is available again',
};

/**
 * Reservations of a kind no payout claimed within PAYOUT_UNCLAIMED_AFTER_MS (the answer to the reservation was
 * lost, or the operator's request died after the ledger reserved), cancelled under their lock; returns their ids.
 */
async function cancelUnclaimed<Row>(
  ctx: ServiceContext,
  deps: LedgerDeps,
  kind: UnclaimedKind<Row>,
): Promise<string[]> {
  const cutoff = new Date(deps.now().getTime() - deps.config.payoutUnclaimedAfterMs);
  const unclaimedOnly = kind.unclaimedOnly;
  const unclaimed = await sql<{
    id: string;
  }>`select ${sql.ref(kind.idColumn)} as id from ${sql.table(kind.table)}
      where ${unclaimedOnly} and created_at < ${cutoff}
      order by created_at limit ${SWEEP_BATCH}`.execute(ctx.db);
  const cancelled: string[] = [];
  for (const { id } of unclaimed.rows) {
    const done = await ctx.inTransaction(async (trx) => {
      await kind.lock(trx, id);
      const rows = await sql<Row>`select * from ${sql.table(kind.table)}
          where ${sql.ref(kind.idColumn)} = ${id} and ${unclaimedOnly}`.execute(trx);
      const row = rows.rows[0];
      if (!row) return false;
      await kind.cancel(trx, deps, row);
      return true;
    });
    if (!done) continue;
    cancelled.push(id);
    deps.logger.error(
      { [kind.idColumn]: id, unclaimedAfterMs: deps.config.payoutUnclaimedAfterMs },
      kind.cancelledMessage,
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
