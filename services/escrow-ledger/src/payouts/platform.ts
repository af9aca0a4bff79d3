import { enqueueEvent } from '@paygate/bus';
import { createEvent, type EventData } from '@paygate/contracts';
import { formatUsdc, parseUsdc } from '@paygate/money';
import { sql } from 'kysely';
import type { LedgerTrx, Row } from '../db';
import type { LedgerDeps, TypedEnvelope } from '../deps';
import { ReservationMismatchError, UnknownRecordError } from '../errors';
import { credit, debit, lockAccount, postEntry } from '../ledger/entries';
import { PayoutRefusal } from '../reasons';

type PlatformPayoutRow = Row<'platform_payouts', 'status' | 'amount_micro' | 'treasury_address'>;

async function lockedPlatformPayout(
  trx: LedgerTrx,
  payoutId: string,
): Promise<PlatformPayoutRow | undefined> {
  await sql`select pg_advisory_xact_lock(hashtextextended(${`platform_payout:${payoutId}`}, 0))`.execute(trx);
  return (
    await sql<PlatformPayoutRow>`select status, amount_micro, treasury_address from platform_payouts
        where payout_id = ${payoutId}`.execute(trx)
  ).rows[0];
}

/**
 * `revenue.payout_requested`: the whole platform revenue to platform_payout_pending for the treasury address the
 * request names, `payout.reserved`; nothing to pay: `payout.refused`. Once per payoutId; the revenue account's lock
 * serialises two payouts, so the second finds nothing.
 */
export async function onPlatformPayoutRequested(
  trx: LedgerTrx,
  event: TypedEnvelope<'revenue.payout_requested'>,
  deps: LedgerDeps,
): Promise<void> {
  const { payoutId, treasuryAddress } = event.data;
  if (await lockedPlatformPayout(trx, payoutId)) return;
  const revenue = await lockAccount(trx, 'platform_revenue');
  const now = deps.now();
  if (revenue <= 0n) {
    await enqueueEvent(
      trx,
      createEvent('payout.refused', 'escrow-ledger', {
        payoutId,
        kind: 'platform',
        sellerId: null,
        reason: PayoutRefusal.NothingAvailable,
        available: formatUsdc(revenue),
        refusedAt: now.toISOString(),
      }),
    );
    return;
  }
  const treasury = treasuryAddress.toLowerCase();
  await postEntry(trx, {
    idempotencyKey: `platform_payout_reserve:${payoutId}`,
    entryType: 'platform_payout_reserve',
    lines: [debit('platform_revenue', revenue), credit('platform_payout_pending', revenue)],
    memo: { payoutId, treasuryAddress: treasury },
  });
  await trx
    .insertInto('platform_payouts')
    .values({
      payout_id: payoutId,
      treasury_address: treasury,
      amount_micro: revenue,
      status: 'reserved',
      created_at: now,
    })
    .execute();
  await enqueueEvent(
    trx,
    createEvent('payout.reserved', 'escrow-ledger', {
      payoutId,
      kind: 'platform',
      sellerId: null,
      amount: formatUsdc(revenue),
      payoutAddress: treasury,
      reservedAt: now.toISOString(),
    }),
  );
}

/** `payout.failed` of a platform payout: nothing left escrow; the reserved amount returns to platform revenue. */
export async function onPlatformPayoutFailed(
  trx: LedgerTrx,
  failed: EventData<'payout.failed'>,
  deps: LedgerDeps,
): Promise<void> {
  const payout = await lockedPlatformPayout(trx, failed.payoutId);
  if (!payout) throw new UnknownRecordError('payout.failed', 'platform payout', failed.payoutId);
  if (payout.status === 'cancelled') return;
  const amountMicro = BigInt(payout.amount_micro);
  if (payout.status !== 'reserved' || parseUsdc(failed.amount) !== amountMicro) {
    throw new ReservationMismatchError(
      'payout.failed',
      failed.payoutId,
      `status ${payout.status}, reserved ${formatUsdc(amountMicro)}, failed ${failed.amount}`,
      'platform reservation',
    );
  }
  await postEntry(trx, {
    idempotencyKey: `platform_payout_cancel:${failed.payoutId}`,
    entryType: 'platform_payout_cancel',
    lines: [debit('platform_payout_pending', amountMicro), credit('platform_revenue', amountMicro)],
    memo: { payoutId: failed.payoutId, reason: failed.reason.slice(0, 200) },
  });
  await trx
    .updateTable('platform_payouts')
    .set({ status: 'cancelled', completed_at: deps.now() })
    .where('payout_id', '=', failed.payoutId)
    .execute();
}

/** The platform payout was confirmed on chain: the reserved USDC left the escrow wallet. */
export async function onPlatformPayoutCompleted(
  trx: LedgerTrx,
  event: TypedEnvelope<'revenue.paid_out'>,
  deps: LedgerDeps,
): Promise<void> {
  const d = event.data;
  const payout = await lockedPlatformPayout(trx, d.payoutId);
  if (!payout) throw new UnknownRecordError('revenue.paid_out', 'payout', d.payoutId);
  if (payout.status === 'completed') return;
  const sentMicro = parseUsdc(d.amount);
  if (
    payout.status !== 'reserved' ||
    sentMicro !== BigInt(payout.amount_micro) ||
    payout.treasury_address.toLowerCase() !== d.treasuryAddress.toLowerCase()
  ) {
    // Money left the wallet that the ledger did not reserve for it: an operator must look (dead letter).
    throw new ReservationMismatchError(
      'revenue.paid_out',
      d.payoutId,
      `status ${payout.status}, reserved ${formatUsdc(BigInt(payout.amount_micro))}, sent ${d.amount}`,
    );
  }
  await postEntry(trx, {
    idempotencyKey: `platform_payout:${d.payoutId}`,
    entryType: 'platform_payout_sent',
    lines: [debit('platform_payout_pending', sentMicro), credit('escrow_asset', sentMicro)],
    memo: { payoutId: d.payoutId, txHash: d.txHash, treasuryAddress: d.treasuryAddress },
  });
  await trx
    .updateTable('platform_payouts')
    .set({ status: 'completed', tx_hash: d.txHash.toLowerCase(), completed_at: deps.now() })
    .where('payout_id', '=', d.payoutId)
    .execute();
}
