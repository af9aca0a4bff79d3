import { enqueueEvent } from '@paygate/bus';
import { createEvent, type EventData, type TraceContext } from '@paygate/contracts';
import { formatUsdc, parseUsdc } from '@paygate/money';
import { currentTraceCarrier, withSpan } from '@paygate/telemetry';
import { sql } from 'kysely';
import type { LedgerDatabase, LedgerTrx, Row } from '../db';
import type { LedgerDeps, TypedEnvelope } from '../deps';
import { PayoutAddressUnknownError, ReservationMismatchError, UnknownRecordError } from '../errors';
import { credit, debit, lockAccount, postEntry } from '../ledger/entries';
import { PayoutRefusal } from '../reasons';

type ReservationRow = Omit<LedgerDatabase['payout_reservations'], 'tx_hash' | 'created_at' | 'completed_at'>;

/** The ledger's own view of where each seller is paid (newer revisions only): payouts go there, nowhere else. */
export async function onSellerUpdated(trx: LedgerTrx, event: TypedEnvelope<'seller.updated'>): Promise<void> {
  const seller = event.data;
  await sql`insert into seller_payout_addresses (seller_id, revision, payout_address)
      values (${seller.sellerId}, ${seller.revision}, ${seller.payoutAddress.toLowerCase()})
      on conflict (seller_id) do update set revision = excluded.revision,
        payout_address = excluded.payout_address, updated_at = now()
      where seller_payout_addresses.revision < excluded.revision`.execute(trx);
}

/** Serialises everything done to one settlement's payout reservation (decide, complete, give back). */
const lockSettlement = (trx: LedgerTrx, settlementId: string) =>
  sql`select pg_advisory_xact_lock(hashtextextended(${`payout:${settlementId}`}, 0))`.execute(trx);

/**
 * `settlement.due`: reserves the seller's payable balance (> 0 and >= the minimum) to the ledger's own payout
 * address, `payout.reserved`; else `payout.refused`. Per settlementId a reservation stands; a refusal reserved
 * nothing, so a later due of the same id (settle-now after money became available) is decided again.
 */
export async function onSettlementDue(
  trx: LedgerTrx,
  event: TypedEnvelope<'settlement.due'>,
  deps: LedgerDeps,
): Promise<void> {
  const due = event.data;
  await lockSettlement(trx, due.settlementId);
  const existing = await trx
    .selectFrom('payout_reservations')
    .select('status')
    .where('settlement_id', '=', due.settlementId)
    .executeTakeFirst();
  if (existing && existing.status !== 'refused') return;
  const { available, paidOut } = await lockPayableBalance(trx, due.sellerId);
  const now = deps.now();
  if (!(available > 0n && available >= parseUsdc(due.minimumAmount))) {
    const refusal = available <= 0n ? PayoutRefusal.NothingAvailable : PayoutRefusal.BelowMinimum;
    await recordReservation(trx, due, { ok: false, available, reason: refusal, payoutAddress: null, now });
    await enqueueEvent(
      trx,
      createEvent('payout.refused', 'escrow-ledger', {
        payoutId: due.settlementId,
        kind: 'seller',
        sellerId: due.sellerId,
        reason: refusal,
        available: formatUsdc(available),
        refusedAt: now.toISOString(),
      }),
    );
    return;
  }
  const address = await trx
    .selectFrom('seller_payout_addresses')
    .select('payout_address')
    .where('seller_id', '=', due.sellerId)
    .executeTakeFirst();
  const payoutAddress = address?.payout_address;
  // The ledger's view of the seller lags settlement's (both hear seller.updated): redelivered with backoff.
  if (!payoutAddress) throw new PayoutAddressUnknownError(due.sellerId);
  await postEntry(trx, {
    idempotencyKey: `payout_reserve:${due.settlementId}`,
    entryType: 'payout_reserve',
    lines: [
      debit('seller_available', available, due.sellerId),
      credit('seller_payout_pending', available, due.sellerId),
    ],
    memo: { settlementId: due.settlementId, payoutAddress },
  });
  await sql`update transactions set escrow_status = 'payout_pending', settlement_id = ${due.settlementId}
      where id = any(${paidOut}::text[])`.execute(trx);
  await recordReservation(trx, due, { ok: true, available, reason: null, payoutAddress, now });
  await enqueuePayoutReserved(trx, due, { available, payoutAddress, paidOut, now });
}

/** The settlement's decision, once per settlementId: a refusal is replaced by the next due's decision. */
async function recordReservation(
  trx: LedgerTrx,
  due: EventData<'settlement.due'>,
  r: { ok: boolean; available: bigint; reason: string | null; payoutAddress: string | null; now: Date },
): Promise<void> {
  await trx
    .insertInto('payout_reservations')
    .values({
      settlement_id: due.settlementId,
      seller_id: due.sellerId,
      ok: r.ok,
      amount_micro: r.ok ? r.available : 0n,
      available_micro: r.available,
      reason: r.reason,
      status: r.ok ? 'reserved' : 'refused',
      payout_address: r.payoutAddress,
      created_at: r.now,
    })
    .onConflict((oc) =>
      oc.column('settlement_id').doUpdateSet((eb) => ({
        ok: eb.ref('excluded.ok'),
        amount_micro: eb.ref('excluded.amount_micro'),
        available_micro: eb.ref('excluded.available_micro'),
        reason: eb.ref('excluded.reason'),
        status: eb.ref('excluded.status'),
        payout_address: eb.ref('excluded.payout_address'),
      })),
    )
    .execute();
}

/** `payout.reserved`: what settlement sends, traced with the paid calls it pays. */
async function enqueuePayoutReserved(
  trx: LedgerTrx,
  due: EventData<'settlement.due'>,
  reserved: { available: bigint; payoutAddress: string; paidOut: string[]; now: Date },
): Promise<void> {
  const { available, payoutAddress, paidOut, now } = reserved;
  const paid = await paidPaymentTraces(trx, paidOut);
  // The payout's trace continues the paid call's when it pays exactly one, else the due one's naming the paid calls.
  await withSpan(
    'ledger payout reserved',
    {
      ...(paid.length === 1 && paidOut.length === 1 ? { carrier: paid[0] } : {}),
      attributes: {
        'paygate.payout_id': due.settlementId,
        'paygate.payout.payments': paidOut.length,
        ...(paid.length > 0
          ? { 'paygate.payout.paid_traceparents': paid.map((t) => t.traceparent).join(',') }
          : {}),
      },
    },
    () =>
      enqueueEvent(
        trx,
        createEvent(
          'payout.reserved',
          'escrow-ledger',
          {
            payoutId: due.settlementId,
            kind: 'seller',
            sellerId: due.sellerId,
            amount: formatUsdc(available),
            payoutAddress,
            reservedAt: now.toISOString(),
          },
          { trace: currentTraceCarrier() },
        ),
      ),
  );
}

/** Paid calls' trace contexts named on one payout span, at most (the oldest payments'). */
const PAID_TRACES_PER_PAYOUT = 32;

/** The paid calls' trace contexts, from each payment entry's memo `trace` (a re-booking after a reorg has none). */
async function paidPaymentTraces(trx: LedgerTrx, transactionIds: string[]): Promise<TraceContext[]> {
  if (transactionIds.length === 0) return [];
  // A payment booked again after a reorg has a payment entry per inclusion: its latest names it.
  const rows = await sql<{ trace: Partial<TraceContext> | null }>`select trace from (
        select distinct on (transaction_id) id, memo->'trace' as trace from journal_entries
         where transaction_id = any(${transactionIds}::text[]) and entry_type = 'payment'
         order by transaction_id, id desc) latest
      where trace is not null order by id limit ${PAID_TRACES_PER_PAYOUT}`.execute(trx);
  return rows.rows.flatMap(({ trace }) => {
    if (typeof trace?.traceparent !== 'string' || trace.traceparent.length > 128) return [];
    const state =
      typeof trace.tracestate === 'string' && trace.tracestate.length <= 512 ? trace.tracestate : '';
    return [{ traceparent: trace.traceparent, ...(state ? { tracestate: state } : {}) }];
  });
}

/**
 * What of the seller's available balance may be paid out (locked): all but the unrefunded seller share of released
 * payments with a pending buyer refund request; and the released payments the payout takes.
 */
async function lockPayableBalance(
  trx: LedgerTrx,
  sellerId: string,
): Promise<{ available: bigint; paidOut: string[] }> {
  // The seller's released payments first (a refund locks its transaction, then the accounts: same order).
  // A payment with a buyer's pending refund request is not paid out until the request is decided.
  const released = await sql<
    Row<'transactions', 'id'> & { unrefunded_micro: bigint; disputed: boolean }
  >`select id,
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

async function lockedReservation(trx: LedgerTrx, settlementId: string): Promise<ReservationRow | undefined> {
  await lockSettlement(trx, settlementId);
  return (
    await sql<ReservationRow>`select * from payout_reservations where settlement_id = ${settlementId}`.execute(
      trx,
    )
  ).rows[0];
}

/** `payout.failed`: the reservation goes back to seller_available, once; only this event gives one back. */
export async function onSellerPayoutFailed(
  trx: LedgerTrx,
  failed: EventData<'payout.failed'>,
  deps: LedgerDeps,
): Promise<void> {
  const reservation = await lockedReservation(trx, failed.payoutId);
  if (!reservation) throw new UnknownRecordError('payout.failed', 'settlement', failed.payoutId);
  if (reservation.status === 'cancelled') return;
  if (reservation.status !== 'reserved' || parseUsdc(failed.amount) !== reservation.amount_micro) {
    // Booked as sent, or not what was reserved: an operator must look (dead letter).
    throw new ReservationMismatchError(
      'payout.failed',
      failed.payoutId,
      `status ${reservation.status}, reserved ${formatUsdc(reservation.amount_micro)}, failed ${failed.amount}`,
    );
  }
  await postEntry(trx, {
    idempotencyKey: `payout_cancel:${reservation.settlement_id}`,
    entryType: 'payout_cancel',
    lines: [
      debit('seller_payout_pending', reservation.amount_micro, reservation.seller_id),
      credit('seller_available', reservation.amount_micro, reservation.seller_id),
    ],
    memo: { settlementId: reservation.settlement_id, reason: failed.reason.slice(0, 200) },
  });
  await trx
    .updateTable('transactions')
    .set({ escrow_status: 'available', settlement_id: null })
    .where('settlement_id', '=', reservation.settlement_id)
    .where('escrow_status', '=', 'payout_pending')
    .execute();
  await trx
    .updateTable('payout_reservations')
    .set({ status: 'cancelled', completed_at: deps.now() })
    .where('settlement_id', '=', reservation.settlement_id)
    .execute();
}

/** The payout was confirmed on chain: the reserved USDC left the escrow wallet. */
export async function onSettlementCompleted(
  trx: LedgerTrx,
  event: TypedEnvelope<'settlement.completed'>,
  deps: LedgerDeps,
): Promise<void> {
  const d = event.data;
  const reservation = await lockedReservation(trx, d.settlementId);
  if (!reservation) throw new UnknownRecordError('settlement.completed', 'settlement', d.settlementId);
  if (reservation.status === 'completed') return;
  const sentMicro = parseUsdc(d.amount);
  if (
    reservation.status !== 'reserved' ||
    sentMicro !== reservation.amount_micro ||
    reservation.payout_address?.toLowerCase() !== d.payoutAddress.toLowerCase()
  ) {
    // Money left the wallet that the ledger did not reserve for it: an operator must look (dead letter).
    throw new ReservationMismatchError(
      'settlement.completed',
      d.settlementId,
      `status ${reservation.status}, reserved ${formatUsdc(reservation.amount_micro)} to ${reservation.payout_address}, sent ${d.amount} to ${d.payoutAddress}`,
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
  await trx
    .updateTable('transactions')
    .set({ escrow_status: 'settled', settled_at: now })
    .where('settlement_id', '=', d.settlementId)
    .where('escrow_status', '=', 'payout_pending')
    .execute();
  await trx
    .updateTable('payout_reservations')
    .set({ status: 'completed', tx_hash: d.txHash.toLowerCase(), completed_at: now })
    .where('settlement_id', '=', d.settlementId)
    .execute();
}
