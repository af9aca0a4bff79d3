import { type RpcServer, serveRpcs } from '@paygate/bus';
import type { EventData, EventEnvelope, RpcReply, RpcRequest } from '@paygate/contracts';
import { formatUsdc, parseChainUsdc, parseUsdc } from '@paygate/money';
import { type BackgroundTask, PollingLoop, type ServiceContext } from '@paygate/runtime';
import { sql, type Transaction } from 'kysely';
import type { LedgerDeps } from '../deps';
import { credit, debit, lockAccount, postEntry } from '../ledger/entries';

type ReservePayoutRequest = RpcRequest<'ledger.reserve_payout'>;
type ReservePayoutReply = RpcReply<'ledger.reserve_payout'>;
type CancelPayoutReply = RpcReply<'ledger.cancel_payout'>;

interface ReservationRow {
  settlement_id: string;
  seller_id: string;
  ok: boolean;
  amount_micro: bigint;
  available_micro: bigint;
  reason: string | null;
  status: 'reserved' | 'completed' | 'cancelled' | 'refused';
  payout_address: string | null;
}

function replyOf(row: ReservationRow): ReservePayoutReply {
  if (row.ok) return { ok: true, amount: formatUsdc(row.amount_micro) };
  return {
    ok: false,
    reason: row.reason as 'below_minimum' | 'nothing_available',
    available: formatUsdc(row.available_micro),
  };
}

const lockSettlement = (trx: Transaction<any>, settlementId: string) =>
  sql`select pg_advisory_xact_lock(hashtextextended(${`payout:${settlementId}`}, 0))`.execute(trx);

/**
 * Moves the seller's available balance to payout-pending when it is > 0 and >= the minimum, in one
 * transaction, idempotently per settlementId. The seller share of released payments with a buyer's pending
 * refund request stays available (not paid out) until the request is decided (a repeated request gets the stored reservation; a stored refusal
 * is evaluated again).
 */
export async function reservePayout(
  ctx: ServiceContext,
  deps: LedgerDeps,
  request: ReservePayoutRequest,
): Promise<ReservePayoutReply> {
  // The request was validated against the contract (ids, a decimal USDC minimum) before it got here.
  const minimumMicro = parseUsdc(request.minimumAmount);
  return ctx.inTransaction(async (trx) => {
    await lockSettlement(trx, request.settlementId);
    const existing =
      await sql<ReservationRow>`select * from payout_reservations where settlement_id = ${request.settlementId}`.execute(
        trx,
      );
    // A refusal reserved nothing, so it is evaluated again: settlement asks again only for a settlement it has
    // not paid (an operator's settle-now after money became available later in the period).
    if (existing.rows[0] && existing.rows[0].status !== 'refused') return replyOf(existing.rows[0]);
    // The seller's released payments first (a refund locks its transaction, then the accounts: same order).
    // A payment with a buyer's pending refund request is not paid out until the request is decided.
    const released = await sql<{ id: string; unrefunded_micro: bigint; disputed: boolean }>`select id,
          seller_share_micro - refunded_seller_micro as unrefunded_micro,
          exists (select 1 from refund_requests rr where rr.transaction_id = t.id and rr.status = 'pending') as disputed
        from transactions t where seller_id = ${request.sellerId} and escrow_status = 'available'
        order by id for update`.execute(trx);
    const disputedMicro = released.rows
      .filter((row) => row.disputed)
      .reduce((sum, row) => sum + BigInt(row.unrefunded_micro), 0n);
    const balance = await lockAccount(trx, 'seller_available', request.sellerId);
    const available = balance - disputedMicro;
    const now = deps.now();
    const ok = available > 0n && available >= minimumMicro;
    const reason = ok ? null : available <= 0n ? 'nothing_available' : 'below_minimum';
    if (ok) {
      await postEntry(trx, {
        idempotencyKey: `payout_reserve:${request.settlementId}`,
        entryType: 'payout_reserve',
        lines: [
          debit('seller_available', available, request.sellerId),
          credit('seller_payout_pending', available, request.sellerId),
        ],
        memo: { settlementId: request.settlementId },
      });
      const paidOut = released.rows.filter((row) => !row.disputed).map((row) => row.id);
      await sql`update transactions set escrow_status = 'payout_pending', settlement_id = ${request.settlementId}
          where id = any(${paidOut}::text[])`.execute(trx);
    }
    const payoutAddress = request.payoutAddress?.toLowerCase() ?? null;
    const row =
      await sql<ReservationRow>`insert into payout_reservations (settlement_id, seller_id, ok, amount_micro,
          available_micro, reason, status, payout_address, created_at)
        values (${request.settlementId}, ${request.sellerId}, ${ok}, ${ok ? available : 0n}, ${available}, ${reason},
          ${ok ? 'reserved' : 'refused'}, ${payoutAddress}, ${now})
        on conflict (settlement_id) do update set ok = excluded.ok, amount_micro = excluded.amount_micro,
          available_micro = excluded.available_micro, reason = excluded.reason, status = excluded.status,
          payout_address = excluded.payout_address
        returning *`.execute(trx);
    return replyOf(row.rows[0]!);
  });
}

/** Settlement gave a payout up: the reserved amount returns to the seller's available balance. */
export async function cancelPayout(
  ctx: ServiceContext,
  deps: LedgerDeps,
  request: RpcRequest<'ledger.cancel_payout'>,
): Promise<CancelPayoutReply> {
  return ctx.inTransaction(async (trx) => {
    await lockSettlement(trx, request.settlementId);
    const rows =
      await sql<ReservationRow>`select * from payout_reservations where settlement_id = ${request.settlementId}`.execute(
        trx,
      );
    const reservation = rows.rows[0];
    if (!reservation) return { ok: false, reason: 'unknown_settlement' };
    if (reservation.status === 'completed') return { ok: false, reason: 'already_completed' };
    if (reservation.status === 'refused') return { ok: true, status: 'refused' };
    if (reservation.status === 'reserved') await cancelReservation(trx, deps, reservation, null);
    return { ok: true, status: 'cancelled' };
  });
}

/** A reserved payout (locked by the caller) given up: its amount back to available, its transactions too. */
async function cancelReservation(
  trx: Transaction<any>,
  deps: LedgerDeps,
  reservation: ReservationRow,
  reason: string | null,
): Promise<void> {
  await postEntry(trx, {
    idempotencyKey: `payout_cancel:${reservation.settlement_id}`,
    entryType: 'payout_cancel',
    lines: [
      debit('seller_payout_pending', reservation.amount_micro, reservation.seller_id),
      credit('seller_available', reservation.amount_micro, reservation.seller_id),
    ],
    memo: { settlementId: reservation.settlement_id, ...(reason ? { reason } : {}) },
  });
  await sql`update transactions set escrow_status = 'available', settlement_id = null
      where settlement_id = ${reservation.settlement_id} and escrow_status = 'payout_pending'`.execute(trx);
  await sql`update payout_reservations set status = 'cancelled', completed_at = ${deps.now()}
      where settlement_id = ${reservation.settlement_id}`.execute(trx);
}

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
  return { cancelled, repaired: repaired.rows.length };
}

/** Runs sweepPayoutReservations every PAYOUT_SWEEP_INTERVAL_MS. */
export class PayoutSweep implements BackgroundTask {
  private readonly loop: PollingLoop;

  constructor(
    private readonly ctx: ServiceContext,
    private readonly deps: LedgerDeps,
  ) {
    const intervalMs = deps.config.payoutSweepIntervalMs;
    this.loop = new PollingLoop(
      async () => {
        await sweepPayoutReservations(this.ctx, this.deps);
      },
      { what: 'payout reservation sweep', logger: ctx.logger, intervalMs, firstDelayMs: intervalMs },
    );
  }

  start(): void {
    this.loop.start();
  }

  async stop(): Promise<void> {
    await this.loop.stop();
  }
}

/** The payout was confirmed on chain: the reserved USDC left the escrow wallet. */
export async function onSettlementCompleted(
  trx: Transaction<any>,
  event: EventEnvelope<'settlement.completed', EventData<'settlement.completed'>>,
  deps: LedgerDeps,
): Promise<void> {
  const d = event.data;
  await lockSettlement(trx, d.settlementId);
  const rows =
    await sql<ReservationRow>`select * from payout_reservations where settlement_id = ${d.settlementId}`.execute(
      trx,
    );
  const reservation = rows.rows[0];
  if (!reservation) throw new Error(`settlement.completed for unknown settlement ${d.settlementId}`);
  if (reservation.status === 'completed') return;
  const sentMicro = parseUsdc(d.amount);
  if (reservation.status !== 'reserved' || sentMicro !== reservation.amount_micro) {
    // Money left the wallet that the ledger did not reserve for it: an operator must look (dead letter).
    throw new Error(
      `settlement.completed ${d.settlementId} does not match its reservation (status ${reservation.status}, reserved ${formatUsdc(reservation.amount_micro)}, sent ${d.amount})`,
    );
  }
  const now = deps.now();
  await postEntry(trx, {
    idempotencyKey: `payout:${d.settlementId}`,
    entryType: 'payout_sent',
    lines: [
      debit('seller_payout_pending', sentMicro, reservation.seller_id),
      credit('escrow_asset', sentMicro),
    ],
    memo: { settlementId: d.settlementId, txHash: d.txHash, payoutAddress: d.payoutAddress },
  });
  await sql`update transactions set escrow_status = 'settled', settled_at = ${now}
      where settlement_id = ${d.settlementId} and escrow_status = 'payout_pending'`.execute(trx);
  await sql`update payout_reservations set status = 'completed', tx_hash = ${d.txHash.toLowerCase()},
        payout_address = ${d.payoutAddress.toLowerCase()}, completed_at = ${now}
      where settlement_id = ${d.settlementId}`.execute(trx);
}

type AuthorizeReply = RpcReply<'ledger.authorize_transfer'>;
const refuse = (
  reason: Exclude<AuthorizeReply, { ok: true }>['reason'],
  message: string,
): AuthorizeReply => ({ ok: false, reason, message });

/**
 * Settlement asks before it sends anything out of escrow: is this exact transfer (id, recipient, amount) one the
 * ledger booked and has not seen sent? A refund: a pending refund to its payer; a seller payout: a reserved
 * payout to the address it was reserved for; a platform payout: a reserved one to its treasury address.
 * Read-only: the answer for a transfer that is already signed never matters (settlement only re-sends its bytes).
 */
export async function authorizeTransfer(
  ctx: ServiceContext,
  request: RpcRequest<'ledger.authorize_transfer'>,
): Promise<AuthorizeReply> {
  const amountMicro = parseChainUsdc(request.amount);
  const to = request.to.toLowerCase();
  let booked: { status: string; to: string | null; amount_micro: bigint } | undefined;
  let pendingStatus: string;
  if (request.kind === 'refund') {
    booked = (
      await sql<{ status: string; to: string; amount_micro: bigint }>`select status, payer as to, amount_micro
        from refunds where id = ${request.id}`.execute(ctx.db)
    ).rows[0];
    pendingStatus = 'pending';
  } else if (request.kind === 'payout') {
    booked = (
      await sql<{
        status: string;
        to: string | null;
        amount_micro: bigint;
      }>`select status, payout_address as to,
        amount_micro from payout_reservations where settlement_id = ${request.id}`.execute(ctx.db)
    ).rows[0];
    pendingStatus = 'reserved';
  } else {
    booked = (
      await sql<{ status: string; to: string; amount_micro: bigint }>`select status, treasury_address as to,
        amount_micro from platform_payouts where payout_id = ${request.id}`.execute(ctx.db)
    ).rows[0];
    pendingStatus = 'reserved';
  }
  if (!booked) return refuse('unknown_transfer', `the ledger booked no ${request.kind} ${request.id}`);
  if (booked.status === 'completed') {
    return refuse('already_sent', `${request.kind} ${request.id} is already booked as sent`);
  }
  if (booked.status !== pendingStatus) {
    return refuse('not_pending', `${request.kind} ${request.id} is ${booked.status}`);
  }
  // A reservation made before the ledger kept payout addresses has none: refused (settlement then cancels it,
  // and the next settlement reserves again with its address).
  if (booked.to === null || booked.to.toLowerCase() !== to) {
    return refuse('recipient_differs', `${request.kind} ${request.id} is booked to ${booked.to}`);
  }
  if (BigInt(booked.amount_micro) !== amountMicro) {
    return refuse(
      'amount_differs',
      `${request.kind} ${request.id} is booked for ${formatUsdc(BigInt(booked.amount_micro))} USDC`,
    );
  }
  if (request.kind === 'payout') {
    // Claimed by its payout: never swept as unclaimed from now on. Under the settlement's lock, so a sweep that
    // cancelled it first makes this a refusal (nothing is signed for a cancelled reservation).
    const claimed = await ctx.inTransaction(async (trx) => {
      await lockSettlement(trx, request.id);
      const updated = await sql`update payout_reservations set authorized_at = coalesce(authorized_at, now())
          where settlement_id = ${request.id} and status = 'reserved'`.execute(trx);
      return Number(updated.numAffectedRows ?? 0n) > 0;
    });
    if (!claimed) return refuse('not_pending', `payout ${request.id} is no longer reserved`);
  }
  return { ok: true };
}

const lockPlatformPayout = (trx: Transaction<any>, payoutId: string) =>
  sql`select pg_advisory_xact_lock(hashtextextended(${`platform_payout:${payoutId}`}, 0))`.execute(trx);

/**
 * An operator's platform payout: the whole platform revenue balance moves to platform_payout_pending for
 * `payoutId`, to be sent to the treasury address. Idempotent per payoutId; the revenue account's lock
 * serialises two payouts, so the second finds nothing (only what the account holds leaves escrow).
 */
export async function reservePlatformPayout(
  ctx: ServiceContext,
  deps: LedgerDeps,
  request: RpcRequest<'ledger.reserve_platform_payout'>,
): Promise<RpcReply<'ledger.reserve_platform_payout'>> {
  return ctx.inTransaction(async (trx) => {
    await lockPlatformPayout(trx, request.payoutId);
    const existing = await sql<{ amount_micro: bigint }>`select amount_micro from platform_payouts
        where payout_id = ${request.payoutId}`.execute(trx);
    if (existing.rows[0]) return { ok: true, amount: formatUsdc(BigInt(existing.rows[0].amount_micro)) };
    const revenue = await lockAccount(trx, 'platform_revenue');
    if (revenue <= 0n) return { ok: false, reason: 'nothing_available' };
    await postEntry(trx, {
      idempotencyKey: `platform_payout_reserve:${request.payoutId}`,
      entryType: 'platform_payout_reserve',
      lines: [debit('platform_revenue', revenue), credit('platform_payout_pending', revenue)],
      memo: { payoutId: request.payoutId, treasuryAddress: request.treasuryAddress.toLowerCase() },
    });
    await sql`insert into platform_payouts (payout_id, treasury_address, amount_micro, status, created_at)
        values (${request.payoutId}, ${request.treasuryAddress.toLowerCase()}, ${revenue}, 'reserved', ${deps.now()})`.execute(
      trx,
    );
    return { ok: true, amount: formatUsdc(revenue) };
  });
}

/** Settlement gave a platform payout up: the reserved amount returns to platform revenue. */
export async function cancelPlatformPayout(
  ctx: ServiceContext,
  deps: LedgerDeps,
  request: RpcRequest<'ledger.cancel_platform_payout'>,
): Promise<RpcReply<'ledger.cancel_platform_payout'>> {
  return ctx.inTransaction(async (trx) => {
    await lockPlatformPayout(trx, request.payoutId);
    const rows = await sql<{ status: string; amount_micro: bigint }>`select status, amount_micro
        from platform_payouts where payout_id = ${request.payoutId}`.execute(trx);
    const payout = rows.rows[0];
    if (!payout) return { ok: false, reason: 'unknown_payout' };
    if (payout.status === 'completed') return { ok: false, reason: 'already_completed' };
    if (payout.status === 'reserved') {
      await postEntry(trx, {
        idempotencyKey: `platform_payout_cancel:${request.payoutId}`,
        entryType: 'platform_payout_cancel',
        lines: [
          debit('platform_payout_pending', BigInt(payout.amount_micro)),
          credit('platform_revenue', BigInt(payout.amount_micro)),
        ],
        memo: { payoutId: request.payoutId },
      });
      await sql`update platform_payouts set status = 'cancelled', completed_at = ${deps.now()}
          where payout_id = ${request.payoutId}`.execute(trx);
    }
    return { ok: true };
  });
}

/** The platform payout was confirmed on chain: the reserved USDC left the escrow wallet. */
export async function onPlatformPayoutCompleted(
  trx: Transaction<any>,
  event: EventEnvelope<'revenue.paid_out', EventData<'revenue.paid_out'>>,
  deps: LedgerDeps,
): Promise<void> {
  const d = event.data;
  await lockPlatformPayout(trx, d.payoutId);
  const rows = await sql<{ status: string; amount_micro: bigint; treasury_address: string }>`select status,
      amount_micro, treasury_address from platform_payouts where payout_id = ${d.payoutId}`.execute(trx);
  const payout = rows.rows[0];
  if (!payout) throw new Error(`revenue.paid_out for unknown payout ${d.payoutId}`);
  if (payout.status === 'completed') return;
  const sentMicro = parseUsdc(d.amount);
  if (payout.status !== 'reserved' || sentMicro !== BigInt(payout.amount_micro)) {
    // Money left the wallet that the ledger did not reserve for it: an operator must look (dead letter).
    throw new Error(
      `revenue.paid_out ${d.payoutId} does not match its reservation (status ${payout.status}, reserved ${formatUsdc(BigInt(payout.amount_micro))}, sent ${d.amount})`,
    );
  }
  await postEntry(trx, {
    idempotencyKey: `platform_payout:${d.payoutId}`,
    entryType: 'platform_payout_sent',
    lines: [debit('platform_payout_pending', sentMicro), credit('escrow_asset', sentMicro)],
    memo: { payoutId: d.payoutId, txHash: d.txHash, treasuryAddress: d.treasuryAddress },
  });
  await sql`update platform_payouts set status = 'completed', tx_hash = ${d.txHash.toLowerCase()},
      completed_at = ${deps.now()} where payout_id = ${d.payoutId}`.execute(trx);
}

/** Answers the payout RPCs settlement calls (in the queue group of the ledger's replicas). */
export class PayoutResponders implements BackgroundTask {
  private server: RpcServer | undefined;

  constructor(
    private readonly ctx: ServiceContext,
    private readonly deps: LedgerDeps,
  ) {}

  async start(): Promise<void> {
    this.server = await serveRpcs(
      this.ctx.bus,
      'escrow-ledger',
      {
        'ledger.reserve_payout': (request) => reservePayout(this.ctx, this.deps, request),
        'ledger.cancel_payout': (request) => cancelPayout(this.ctx, this.deps, request),
        'ledger.authorize_transfer': (request) => authorizeTransfer(this.ctx, request),
        'ledger.reserve_platform_payout': (request) => reservePlatformPayout(this.ctx, this.deps, request),
        'ledger.cancel_platform_payout': (request) => cancelPlatformPayout(this.ctx, this.deps, request),
      },
      this.ctx.logger,
    );
  }

  async stop(): Promise<void> {
    await this.server?.stop();
  }
}
