import type { EventData, EventEnvelope, RpcReply, RpcRequest } from '@paygate/contracts';
import { formatUsdc, parseUsdc } from '@paygate/money';
import type { ServiceContext } from '@paygate/runtime';
import { sql, type Transaction } from 'kysely';
import type { LedgerDeps } from '../deps';
import { credit, debit, lockAccount, postEntry } from '../ledger/entries';

export const lockPlatformPayout = (trx: Transaction<any>, payoutId: string) =>
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
      await cancelReservedPlatformPayout(trx, deps, request.payoutId, BigInt(payout.amount_micro));
    }
    return { ok: true };
  });
}

/** A reserved platform payout given up, under its lock: the reserved amount returns to platform revenue. */
export async function cancelReservedPlatformPayout(
  trx: Transaction<any>,
  deps: LedgerDeps,
  payoutId: string,
  amountMicro: bigint,
): Promise<void> {
  await postEntry(trx, {
    idempotencyKey: `platform_payout_cancel:${payoutId}`,
    entryType: 'platform_payout_cancel',
    lines: [debit('platform_payout_pending', amountMicro), credit('platform_revenue', amountMicro)],
    memo: { payoutId },
  });
  await sql`update platform_payouts set status = 'cancelled', completed_at = ${deps.now()}
      where payout_id = ${payoutId}`.execute(trx);
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
