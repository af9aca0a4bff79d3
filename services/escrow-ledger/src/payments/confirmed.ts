import { createEvent } from '@paygate/contracts';
import { formatUsdc, PLATFORM_FEE_PERCENT, parseChainUsdc } from '@paygate/money';
import { currentTraceCarrier } from '@paygate/telemetry';
import { sql } from 'kysely';
import type { ClaimRequest } from '../claims/statement';
import type { LedgerTrx, TransactionRow } from '../db';
import type { LedgerDeps } from '../deps';
import { newTransactionId } from '../ids';
import { transferKey } from '../ledger/entries';

interface BookedPayment {
  payment_id: string;
  outcome: 'booked' | 'duplicate' | 'conflict' | 'conflict_seen';
  transaction_id: string | null;
  conflict_kind: string | null;
  existing_transaction_id: string | null;
}

/** The one call of the database's book_payments (sql/ledger.sql); the fee comes from @paygate/money's definition. */
export async function bookPayments(trx: LedgerTrx, payments: object[], now: Date): Promise<BookedPayment[]> {
  const result =
    await sql<BookedPayment>`select * from book_payments(${JSON.stringify(payments)}::jsonb, ${now},
      ${PLATFORM_FEE_PERCENT.toString()}::integer)`.execute(trx);
  return result.rows;
}

/** A claim's payment as book_payments reads it: the request's payment with the claim's transfer, payer and amount. */
export interface ClaimedPayment {
  request: ClaimRequest;
  payment: NonNullable<ClaimRequest['payment']>;
}

/**
 * A paid call's (x402) payment is not released before `callOutcomeWindowMs` after its claim, whatever its hold
 * period: the gateway's payment.call_failed must reach the ledger before a payout could take the seller's share.
 */
export function paymentToBook(
  { request, payment }: ClaimedPayment,
  transactionId: string,
  now: Date,
  callOutcomeWindowMs: number,
) {
  return {
    eventId: `claim:${payment.paymentId}`,
    transactionId,
    paymentId: payment.paymentId,
    source: payment.source,
    sellerId: payment.sellerId,
    skillId: payment.skillId,
    skillName: payment.skillName,
    endpointId: payment.endpointId,
    sessionId: payment.sessionId,
    payer: request.payer,
    network: payment.network,
    token: payment.token,
    chainId: request.chainId,
    txHash: request.txHash.toLowerCase(),
    logIndex: request.logIndex,
    amountMicro: parseChainUsdc(request.amount).toString(),
    holdPeriodHours: payment.holdPeriodHours,
    releaseNotBefore:
      payment.source === 'x402' ? new Date(now.getTime() + callOutcomeWindowMs).toISOString() : null,
    confirmedAt: now.toISOString(),
  };
}

/** The outcome of one claimed payment's booking: its transaction, or none (parked or refused for an operator). */
export interface ClaimedBooking {
  transactionId: string | null;
  outcome: BookedPayment['outcome'];
}

/** `payment.confirmed` of a payment to book; book_payments writes it to the outbox only if the payment is booked. */
export function paymentConfirmedEvent(p: ReturnType<typeof paymentToBook>) {
  return createEvent(
    'payment.confirmed',
    'escrow-ledger',
    {
      paymentId: p.paymentId,
      source: p.source,
      sellerId: p.sellerId,
      skillId: p.skillId,
      skillName: p.skillName,
      endpointId: p.endpointId,
      sessionId: p.sessionId,
      payer: p.payer,
      amount: formatUsdc(BigInt(p.amountMicro)),
      network: p.network,
      chainId: p.chainId,
      token: p.token,
      txHash: p.txHash,
      logIndex: p.logIndex,
      holdPeriodHours: p.holdPeriodHours,
      confirmedAt: p.confirmedAt,
    },
    { trace: currentTraceCarrier() },
  );
}

/**
 * A payment reversed because its transfer left the chain, whose very transaction is booked unclaimed on the chain
 * again (resent, or mined again), claims it again as a new transaction, matched by payer and amount; a payment is
 * live at most once. Reversed by a reorg, only a gateway (x402) payment: checkout re-matches its session itself.
 */
export async function rebookReversedPayments(
  trx: LedgerTrx,
  deps: LedgerDeps,
  chainId: number,
  txHash: string,
): Promise<number> {
  const reversed = await sql<TransactionRow>`select t.* from transactions t
      where t.chain_id = ${chainId} and t.tx_hash = ${txHash}
        and (t.reversal_reason = 'not_on_chain' or (t.reversal_reason = 'transfer_reorged' and t.source = 'x402'))
        and not exists (select 1 from transactions live where live.payment_id = t.payment_id
          and live.escrow_status <> 'reversed')
      order by t.created_at, t.id
      limit 10`.execute(trx);
  let rebooked = 0;
  for (const payment of reversed.rows) {
    if (await rebookPayment(trx, deps, chainId, txHash, payment)) rebooked += 1;
  }
  return rebooked;
}

/** One reversed payment claims its transfer again, when an unclaimed one of its payer and amount is booked. */
async function rebookPayment(
  trx: LedgerTrx,
  deps: LedgerDeps,
  chainId: number,
  txHash: string,
  payment: TransactionRow,
): Promise<boolean> {
  const target = await sql<{ log_index: number }>`select log_index from transfers
      where chain_id = ${chainId} and tx_hash = ${txHash} and status = 'observed'
        and claimed_by_transaction_id is null and refund_id is null
        and from_address = ${payment.payer} and amount_micro = ${payment.amount_micro}
      order by log_index limit 1 for update`.execute(trx);
  const transfer = target.rows[0];
  if (!transfer) return false;
  const outcome = await bookPayments(
    trx,
    [
      {
        eventId: `rebook:${payment.id}`,
        transactionId: newTransactionId(),
        paymentId: payment.payment_id,
        source: payment.source,
        sellerId: payment.seller_id,
        skillId: payment.skill_id,
        skillName: payment.skill_name,
        endpointId: payment.endpoint_id,
        sessionId: payment.session_id,
        payer: payment.payer,
        network: payment.network,
        chainId,
        txHash,
        logIndex: transfer.log_index,
        amountMicro: payment.amount_micro.toString(),
        holdPeriodHours: payment.hold_period_hours,
        confirmedAt: payment.confirmed_at.toISOString(),
      },
    ],
    deps.now(),
  );
  if (outcome[0]?.outcome !== 'booked') return false;
  deps.logger.info(
    {
      paymentId: payment.payment_id,
      reversedTransactionId: payment.id,
      transactionId: outcome[0].transaction_id,
      transfer: transferKey(chainId, txHash, transfer.log_index),
    },
    'payment reversed as not on chain is on chain again; booked again',
  );
  return true;
}
