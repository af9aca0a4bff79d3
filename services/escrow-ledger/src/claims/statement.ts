import type { ClaimedVia, RpcRequest } from '@paygate/contracts';
import { PLATFORM_FEE_PERCENT, parseChainUsdc } from '@paygate/money';
import { sql } from 'kysely';
import type { LedgerDb } from '../db';
import type { LedgerDeps } from '../deps';
import { LedgerInvariantError } from '../errors';
import { newClaimId, newTransactionId } from '../ids';
import { transferKey } from '../ledger/entries';
import { type ClaimedBooking, paymentConfirmedEvent, paymentToBook } from '../payments/confirmed';
import { reportConflict } from '../payments/conflicts';

export type ClaimRequest = RpcRequest<'ledger.claim_transfer'>;

export interface ClaimRow {
  claim_id: string;
  claimed_via: ClaimedVia;
  reference: string;
  claimed_at: Date;
  /** The payment booked with the claim (null: it pays for nothing the ledger books). */
  payment_id: string | null;
}

export const claimKeyOf = (request: ClaimRequest) =>
  transferKey(request.chainId, request.txHash, request.logIndex);

/** The claim row as claim_and_book found it, before any booking; `fresh` when this request inserted it. */
export interface ClaimOutcomeRow extends ClaimRow {
  fresh: boolean;
  /** The latest ledger transaction of the claim's payment (a repeat's answer); null when none is booked. */
  transaction_id: string | null;
  /** A payment of the transfer stood (a transaction not reversed): a repeat of the claim booked nothing. */
  live: boolean;
}

export interface ClaimedAndBooked {
  held: ClaimOutcomeRow;
  booking?: ClaimedBooking;
}

type ClaimAndBookRow = ClaimOutcomeRow & {
  batch_index: number;
  booking: ClaimedBooking['outcome'] | null;
  booked_transaction_id: string | null;
  conflict_kind: string | null;
  existing_transaction_id: string | null;
};

/**
 * Claims each (distinct) transfer and books the payments the claims bring in one statement, its own transaction, so
 * the shared balance rows the booking locks are never held across a round trip. A repeat by the same claimant books
 * again only when no payment of the transfer stands any more. One outcome per request, in order.
 */
export async function claimAndBook(
  db: LedgerDb,
  requests: ClaimRequest[],
  deps: LedgerDeps,
): Promise<ClaimedAndBooked[]> {
  const now = deps.now();
  const items = requests.map((request) => {
    const claimId = newClaimId();
    const payment = request.payment
      ? paymentToBook(
          { request, payment: request.payment },
          newTransactionId(),
          now,
          deps.config.callOutcomeWindowMs,
        )
      : null;
    return {
      chain_id: request.chainId,
      tx_hash: request.txHash.toLowerCase(),
      log_index: request.logIndex,
      claim_id: claimId,
      claimed_via: request.claimedVia,
      reference: request.reference,
      payer: request.payer.toLowerCase(),
      amount_micro: parseChainUsdc(request.amount).toString(),
      payment_id: request.payment?.paymentId ?? null,
      payment: payment ? { ...payment, confirmedEvent: paymentConfirmedEvent(payment) } : null,
    };
  });
  const rows = (
    await sql<ClaimAndBookRow>`select * from claim_and_book(${JSON.stringify(items)}::jsonb, ${now},
      ${PLATFORM_FEE_PERCENT.toString()}::integer)`.execute(db)
  ).rows;
  const byRequest = new Map<number, ClaimAndBookRow>();
  for (const row of rows)
    if (!byRequest.has(Number(row.batch_index))) byRequest.set(Number(row.batch_index), row);
  return requests.map((request, i) => {
    const row = byRequest.get(i);
    if (!row) throw new LedgerInvariantError(`claim on ${claimKeyOf(request)} neither inserted nor found`);
    const {
      batch_index: _,
      booking,
      booked_transaction_id,
      conflict_kind,
      existing_transaction_id,
      ...held
    } = row;
    if (!booking) return { held };
    if (booking === 'conflict') {
      reportConflict(deps, conflict_kind, {
        paymentId: request.payment?.paymentId ?? '',
        existingTransactionId: existing_transaction_id,
      });
    }
    return {
      held,
      booking: {
        outcome: booking,
        transactionId: booking === 'booked' || booking === 'duplicate' ? booked_transaction_id : null,
      },
    };
  });
}
