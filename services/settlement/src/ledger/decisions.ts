import { type ConsumerOptions, enqueueEvent } from '@paygate/bus';
import { formatAddress } from '@paygate/chain';
import { createEvent, type EventData } from '@paygate/contracts';
import { parseUsdc } from '@paygate/money';
import type { Transaction } from 'kysely';
import type { Clock } from '../clock';
import type { SettlementConfig } from '../config';
import type { SettlementDB } from '../db';
import { UnknownRecordError } from '../errors';
import type { SettlementMetrics } from '../metrics';
import { TransferRefusal } from '../reasons';
import type { EscrowChain } from '../transfers/chain';
import { recordTransfer } from '../transfers/repository';

/** The ledger's available balance may be negative (refunds after settlement): "-3.8". */
function parseSignedUsdc(text: string): bigint {
  return text.startsWith('-') ? -parseUsdc(text.slice(1)) : parseUsdc(text);
}

type Reserved = EventData<'payout.reserved'>;

export interface DecisionDeps {
  config: SettlementConfig;
  chain: EscrowChain;
  metrics: SettlementMetrics;
  clock: Clock;
  onTransferRecorded: () => void;
}

/** A settlement or platform payout in one of these has its payout: one per record, ever. */
export const HAS_PAYOUT = ['sending', 'completed', 'failed'];

/**
 * `payout.reserved` (only the ledger may publish it): the transfer of exactly the reserved amount to exactly the
 * address the event names, in the inbox transaction; a copy records nothing. A platform payout goes only to
 * TREASURY_ADDRESS: another address is given back (`payout.failed`), never sent.
 */
export function payoutReservedConsumer(deps: DecisionDeps): ConsumerOptions<'payout.reserved', SettlementDB> {
  return {
    durable: 'settlement-payout-reserved',
    subject: 'payout.reserved',
    async handler(trx, event) {
      if (event.data.kind === 'seller') await recordSellerPayout(trx, deps, event.data);
      else await recordPlatformPayout(trx, deps, event.data);
    },
    afterCommit: () => deps.onTransferRecorded(),
  };
}

async function recordSellerPayout(trx: Transaction<SettlementDB>, deps: DecisionDeps, reserved: Reserved) {
  const settlement = await trx
    .selectFrom('settlements')
    .select(['status'])
    .where('settlement_id', '=', reserved.payoutId)
    .forUpdate()
    .executeTakeFirst();
  if (!settlement) throw new UnknownRecordError('payout.reserved', 'settlement', reserved.payoutId);
  if (HAS_PAYOUT.includes(settlement.status)) return;
  // Also from `skipped`: the refusal of an earlier due may arrive after the reservation of a later one.
  const amountMicro = parseUsdc(reserved.amount);
  const payoutAddress = formatAddress(reserved.payoutAddress);
  const transferId = await recordTransfer(trx, deps.chain, {
    kind: 'payout',
    idempotencyKey: reserved.payoutId,
    toAddress: payoutAddress,
    amountMicro,
  });
  await trx
    .updateTable('settlements')
    .set({
      status: 'sending',
      amount_micro: amountMicro,
      transfer_id: transferId,
      payout_address: payoutAddress,
      skip_reason: null,
      updated_at: deps.clock(),
    })
    .where('settlement_id', '=', reserved.payoutId)
    .execute();
}

async function recordPlatformPayout(trx: Transaction<SettlementDB>, deps: DecisionDeps, reserved: Reserved) {
  const payout = await trx
    .selectFrom('platform_payouts')
    .select(['status', 'treasury_address'])
    .where('payout_id', '=', reserved.payoutId)
    .forUpdate()
    .executeTakeFirst();
  if (!payout) throw new UnknownRecordError('payout.reserved', 'platform payout', reserved.payoutId);
  if (HAS_PAYOUT.includes(payout.status)) return;
  const amountMicro = parseUsdc(reserved.amount);
  const treasury = deps.config.treasuryAddress?.toLowerCase();
  const to = reserved.payoutAddress.toLowerCase();
  if (!treasury || to !== treasury || to !== payout.treasury_address.toLowerCase()) {
    deps.metrics.transfersRefused.inc({ kind: 'platform_payout', reason: TransferRefusal.RecipientDiffers });
    const reason = `not sent: ${TransferRefusal.RecipientDiffers}: ${to} is not TREASURY_ADDRESS (${treasury ?? 'not set'})`;
    await trx
      .updateTable('platform_payouts')
      .set({ status: 'failed', amount_micro: amountMicro, failure_reason: reason })
      .where('payout_id', '=', reserved.payoutId)
      .execute();
    await enqueuePayoutFailed(trx, deps.clock, { ...reserved, reason });
    return;
  }
  const transferId = await recordTransfer(trx, deps.chain, {
    kind: 'platform_payout',
    idempotencyKey: reserved.payoutId,
    toAddress: formatAddress(reserved.payoutAddress),
    amountMicro,
  });
  await trx
    .updateTable('platform_payouts')
    .set({ status: 'sending', amount_micro: amountMicro, transfer_id: transferId })
    .where('payout_id', '=', reserved.payoutId)
    .execute();
}

/** `payout.refused`: the settlement is skipped (the balance accumulates), or the platform payout refused. */
export function payoutRefusedConsumer(deps: DecisionDeps): ConsumerOptions<'payout.refused', SettlementDB> {
  return {
    durable: 'settlement-payout-refused',
    subject: 'payout.refused',
    async handler(trx, event) {
      const refused = event.data;
      if (refused.kind === 'platform') {
        await trx
          .updateTable('platform_payouts')
          .set({ status: 'refused', completed_at: deps.clock() })
          .where('payout_id', '=', refused.payoutId)
          .where('status', '=', 'requested')
          .execute();
        return;
      }
      const skipped = await trx
        .updateTable('settlements')
        .set({
          status: 'skipped',
          skip_reason: refused.reason,
          available_micro: parseSignedUsdc(refused.available),
          updated_at: deps.clock(),
        })
        .where('settlement_id', '=', refused.payoutId)
        .where('status', '=', 'pending')
        .executeTakeFirst();
      if (Number(skipped.numUpdatedRows ?? 0n) > 0)
        deps.metrics.settlementsSkipped.inc({ reason: refused.reason });
    },
  };
}

/** `payout.failed` in the caller's transaction: nothing left escrow, and only this has the ledger give it back. */
export async function enqueuePayoutFailed(
  trx: Transaction<SettlementDB>,
  clock: Clock,
  payout: Omit<EventData<'payout.failed'>, 'failedAt'>,
): Promise<void> {
  await enqueueEvent(
    trx,
    createEvent('payout.failed', 'settlement', {
      payoutId: payout.payoutId,
      kind: payout.kind,
      sellerId: payout.sellerId,
      amount: payout.amount,
      reason: payout.reason.slice(0, 600),
      failedAt: clock().toISOString(),
    }),
  );
}
