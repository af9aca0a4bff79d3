import { randomBytes } from 'node:crypto';
import { enqueueEvent, leaveReorgTombstone } from '@paygate/bus';
import { createEvent, type EventData, type RpcRequest } from '@paygate/contracts';
import { formatUsdcExact } from '@paygate/money';
import { currentTraceCarrier, type Logger } from '@paygate/telemetry';
import type { CheckoutConfig } from '../config';
import {
  type CheckoutTrx,
  type SessionRow,
  type SessionStatus,
  type TransferRow,
  UNPAID_SESSION,
} from '../db';
import { CheckoutInvariantError } from '../errors';
import { enqueueSessionEvent } from '../sessions/snapshot';
import type { LedgerClaims } from './claims';
import { lockSession, lockTransferAt, lockTransferKey } from './transfer-rows';

type Reorged = EventData<'transfer.reorged'>;
type PaymentToBook = NonNullable<RpcRequest<'ledger.claim_transfer'>['payment']>;

/** What matching decides with: the service's settings and clock, its logger, and the ledger's transfer claims. */
export interface MatchingDeps {
  config: CheckoutConfig;
  logger: Logger;
  claims: LedgerClaims;
}

const newPaymentId = () => `pay_${randomBytes(12).toString('hex')}`;

/** The outcome of applying a transfer to a session, decided by amount and time. */
export function outcomeFor(session: SessionRow, amountMicro: bigint, now: Date): SessionStatus {
  if (amountMicro < session.exact_amount_micro) return 'underpaid';
  if (amountMicro > session.exact_amount_micro) return 'overpaid';
  return now < session.expires_at ? 'paid' : 'paid_late';
}

/**
 * The payment the ledger books with checkout's claim (none when underpaid). The id is fresh: a repeated claim is
 * answered with the id booked the first time.
 */
export function sessionPaymentOf(
  session: SessionRow,
  transfer: Pick<TransferRow, 'network' | 'token_address'>,
  outcome: SessionStatus,
): PaymentToBook | undefined {
  if (outcome === 'underpaid') return undefined;
  return {
    paymentId: newPaymentId(),
    source: 'checkout',
    sellerId: session.seller_id,
    skillId: session.skill_id,
    skillName: session.skill_name,
    endpointId: session.endpoint_id,
    sessionId: session.session_id,
    network: transfer.network as PaymentToBook['network'],
    token: transfer.token_address,
    holdPeriodHours: session.hold_period_hours,
  };
}

/** Records the transfer on the session; the payments row is checkout's record of what the ledger booked. */
export async function applyToSession(
  deps: MatchingDeps,
  trx: CheckoutTrx,
  session: SessionRow,
  transfer: TransferRow,
  outcome: SessionStatus,
  paymentId: string | undefined,
): Promise<SessionRow> {
  const now = deps.config.now();
  const updated = await trx
    .updateTable('sessions')
    .set({
      status: outcome,
      paid_amount_micro: transfer.amount_micro,
      transfer_id: transfer.transfer_id,
      tx_hash: transfer.tx_hash,
      payer: transfer.from_address,
      paid_at: now,
      updated_at: now,
    })
    .where('session_id', '=', session.session_id)
    .returningAll()
    .executeTakeFirstOrThrow();
  if (outcome === 'underpaid') {
    await enqueueSessionEvent(trx, 'checkout.session_underpaid', updated, deps.config);
    return updated;
  }
  if (!paymentId)
    throw new CheckoutInvariantError(`session ${session.session_id} paid without the ledger's payment id`);
  await trx
    .insertInto('payments')
    .values({
      payment_id: paymentId,
      session_id: session.session_id,
      transfer_id: transfer.transfer_id,
      amount_micro: transfer.amount_micro,
      status: 'confirmed',
      confirmed_at: now,
      reversed_at: null,
    })
    .execute();
  await enqueueSessionEvent(trx, 'checkout.session_paid', updated, deps.config);
  return updated;
}

/** A transfer left the canonical chain: reverse its payment and reopen its session. */
export async function reverseReorgedTransfer(
  deps: MatchingDeps,
  trx: CheckoutTrx,
  data: Reorged,
  eventId: string,
): Promise<void> {
  const now = deps.config.now();
  await lockTransferKey(trx, data.chainId, data.txHash, data.logIndex);
  const transfer = await lockTransferAt(trx, data);
  // Not observed here on this block yet (unknown, or reorged on an earlier block and not seen on this one): its
  // transfer.observed of this block is behind, and must not apply it when it comes.
  if (!transfer || (transfer.status === 'reorged' && transfer.block_hash !== data.blockHash.toLowerCase())) {
    await leaveReorgTombstone(trx, data, eventId);
    return;
  }
  // Already reorged, or since re-observed in another block: nothing of ours stands on that block.
  if (transfer.status === 'reorged' || transfer.block_hash !== data.blockHash.toLowerCase()) return;
  await trx
    .updateTable('transfers')
    .set({ status: 'reorged', session_id: null, updated_at: now })
    .where('transfer_id', '=', transfer.transfer_id)
    .execute();
  if (!transfer.session_id) return;
  const session = await lockSession(trx, transfer.session_id).executeTakeFirstOrThrow();
  if (session.transfer_id !== transfer.transfer_id) return;
  // A refunded session took no payment and its transfer is on its way back: nothing to reopen.
  if (session.status === 'refunded') return;
  await reopenSession(deps, trx, session, transfer, data, now);
}

/** The session a reorged transfer paid: its payment reversed (payment.reversed), the session open again. */
async function reopenSession(
  deps: MatchingDeps,
  trx: CheckoutTrx,
  session: SessionRow,
  transfer: TransferRow,
  data: Reorged,
  now: Date,
): Promise<void> {
  const payment = await trx
    .updateTable('payments')
    .set({ status: 'reversed', reversed_at: now })
    .where('transfer_id', '=', transfer.transfer_id)
    .where('status', '=', 'confirmed')
    .returningAll()
    .executeTakeFirst();
  const reopened = await trx
    .updateTable('sessions')
    .set({
      status: now < session.expires_at ? 'open' : 'expired',
      ...UNPAID_SESSION,
      // The amount stayed reserved until late_until, so it is still this session's alone.
      updated_at: now,
    })
    .where('session_id', '=', session.session_id)
    .returningAll()
    .executeTakeFirstOrThrow();
  if (payment) {
    await enqueueEvent(
      trx,
      createEvent(
        'payment.reversed',
        'checkout',
        {
          paymentId: payment.payment_id,
          source: 'checkout',
          sellerId: session.seller_id,
          sessionId: session.session_id,
          chainId: transfer.chain_id,
          txHash: transfer.tx_hash,
          logIndex: transfer.log_index,
          amount: formatUsdcExact(payment.amount_micro),
          reason: `transfer reorged out of block ${data.blockNumber} (${data.blockHash})`,
          reversedAt: now.toISOString(),
        },
        { trace: currentTraceCarrier() },
      ),
    );
  }
  await enqueueSessionEvent(trx, 'checkout.session_reopened', reopened, deps.config);
}
