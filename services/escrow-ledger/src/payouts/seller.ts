import type { EventData, EventEnvelope, RpcReply, RpcRequest } from '@paygate/contracts';
import { formatUsdc, parseUsdc } from '@paygate/money';
import type { ServiceContext } from '@paygate/runtime';
import { sql, type Transaction } from 'kysely';
import type { PayoutReservationsTable } from '../db';
import type { LedgerDeps } from '../deps';
import { credit, debit, lockAccount, postEntry } from '../ledger/entries';

type ReservePayoutRequest = RpcRequest<'ledger.reserve_payout'>;
type ReservePayoutReply = RpcReply<'ledger.reserve_payout'>;
type CancelPayoutReply = RpcReply<'ledger.cancel_payout'>;

/** A reservation as payouts read it: its row (db.ts) without the transfer's bookkeeping columns. */
export type ReservationRow = Omit<
  PayoutReservationsTable,
  'tx_hash' | 'created_at' | 'completed_at' | 'authorized_at' | 'recorded_at'
>;

function replyOf(row: ReservationRow): ReservePayoutReply {
  // Given back (swept as never claimed, or its payout failed): answering its old amount would have settlement
  // record a payout that authorize_transfer refuses.
  if (row.status === 'cancelled') {
    return {
      ok: false,
      reason: 'reservation_cancelled',
      message: `the reservation of ${formatUsdc(row.amount_micro)} USDC for ${row.settlement_id} was cancelled; its money is available again`,
    };
  }
  if (row.ok) return { ok: true, amount: formatUsdc(row.amount_micro) };
  return {
    ok: false,
    reason: row.reason as 'below_minimum' | 'nothing_available',
    available: formatUsdc(row.available_micro),
  };
}

/** Serialises everything done to one settlement's payout reservation (reserve, cancel, sweep, authorize, complete). */
export const lockSettlement = (trx: Transaction<any>, settlementId: string) =>
  sql`select pg_advisory_xact_lock(hashtextextended(${`payout:${settlementId}`}, 0))`.execute(trx);

/**
 * Moves the seller's available balance to payout-pending when it is > 0 and >= the minimum, in one
 * transaction, idempotently per settlementId. The seller share of released payments with a buyer's pending
 * refund request stays available (not paid out) until the request is decided (a repeated request gets the stored reservation; a stored refusal
 * is evaluated again; a reservation given back since is refused, `reservation_cancelled`).
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
    const payoutAddress = request.payoutAddress?.toLowerCase() ?? null;
    // A refusal reserved nothing, so it is evaluated again: settlement asks again only for a settlement it has
    // not paid (an operator's settle-now after money became available later in the period).
    if (existing.rows[0] && existing.rows[0].status !== 'refused') {
      // Settlement recorded its payout (its transaction committed): the reservation is claimed, never swept.
      if (request.recorded) {
        await sql`update payout_reservations set recorded_at = coalesce(recorded_at, ${deps.now()})
          where settlement_id = ${request.settlementId} and status = 'reserved'`.execute(trx);
      }
      // Asked again because settlement lost the answer (its transaction rolled back), after the seller moved its
      // payout address: a reservation nothing was authorized for yet follows the address the transfer will go to.
      if (payoutAddress && existing.rows[0].payout_address !== payoutAddress) {
        await sql`update payout_reservations set payout_address = ${payoutAddress}
          where settlement_id = ${request.settlementId} and status = 'reserved' and authorized_at is null`.execute(
          trx,
        );
      }
      return replyOf(existing.rows[0]);
    }
    const { available, paidOut } = await lockPayableBalance(trx, request.sellerId);
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
      await sql`update transactions set escrow_status = 'payout_pending', settlement_id = ${request.settlementId}
          where id = any(${paidOut}::text[])`.execute(trx);
    }
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

/**
 * What of the seller's available balance may be paid out (locked): all of it but the unrefunded seller share of
 * released payments with a buyer's pending refund request, and the released payments the payout takes.
 */
async function lockPayableBalance(
  trx: Transaction<any>,
  sellerId: string,
): Promise<{ available: bigint; paidOut: string[] }> {
  // The seller's released payments first (a refund locks its transaction, then the accounts: same order).
  // A payment with a buyer's pending refund request is not paid out until the request is decided.
  const released = await sql<{ id: string; unrefunded_micro: bigint; disputed: boolean }>`select id,
        seller_share_micro - refunded_seller_micro as unrefunded_micro,
        exists (select 1 from refund_requests rr where rr.transaction_id = t.id and rr.status = 'pending') as disputed
      from transactions t where seller_id = ${sellerId} and escrow_status = 'available'
      order by id for update`.execute(trx);
  const disputedMicro = released.rows
    .filter((row) => row.disputed)
    .reduce((sum, row) => sum + BigInt(row.unrefunded_micro), 0n);
  const balance = await lockAccount(trx, 'seller_available', sellerId);
  return {
    available: balance - disputedMicro,
    paidOut: released.rows.filter((row) => !row.disputed).map((row) => row.id),
  };
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
export async function cancelReservation(
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
