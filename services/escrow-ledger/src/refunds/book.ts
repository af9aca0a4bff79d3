import { enqueueEvent } from '@paygate/bus';
import { createEvent } from '@paygate/contracts';
import { badRequest, HttpError, notFound } from '@paygate/http';
import { formatUsdc, parseChainUsdc, splitFee } from '@paygate/money';
import { type Selectable, sql } from 'kysely';
import type { AccountKind, LedgerDatabase, LedgerTrx, Row } from '../db';
import type { LedgerDeps, TypedEnvelope } from '../deps';
import { UnknownRecordError } from '../errors';
import { newRefundId } from '../ids';
import { credit, debit, ensureAccounts, postEntry } from '../ledger/entries';
import { LedgerReason } from '../reasons';

export type TransactionForRefund = Row<
  'transactions',
  | 'id'
  | 'seller_id'
  | 'payer'
  | 'chain_id'
  | 'amount_micro'
  | 'seller_share_micro'
  | 'refunded_micro'
  | 'refunded_seller_micro'
  | 'escrow_status'
>;

/** A refund row; `unmatched_transfer` and `unserved_batch` ones have no transaction and no seller. */
export type RefundRow = Selectable<LedgerDatabase['refunds']>;

/** Locks a seller's transaction for a refund decision; 404 when it is not this seller's. */
export async function lockSellerTransaction(
  trx: LedgerTrx,
  transactionId: string,
  sellerId: string,
): Promise<TransactionForRefund> {
  const result =
    await sql<TransactionForRefund>`select id, seller_id, payer, chain_id, amount_micro, seller_share_micro,
        refunded_micro, refunded_seller_micro, escrow_status
      from transactions where id = ${transactionId} and seller_id = ${sellerId} for update`.execute(trx);
  const txn = result.rows[0];
  if (!txn) throw notFound('transaction');
  return txn;
}

type RefundPhase = 'in_escrow' | 'after_release';

/** How a refund divides between the seller and the platform, and out of which accounts it comes. */
export interface RefundSplit {
  amountMicro: bigint;
  /** The transaction's refunded total once this refund is booked. */
  refundedAfter: bigint;
  sellerPart: bigint;
  platformPart: bigint;
  phase: RefundPhase;
}

/** Refuses a refund of a reversed payment, of nothing, or of more than remains refundable. */
export function assertRefundable(txn: TransactionForRefund, amountMicro: bigint): void {
  if (txn.escrow_status === 'reversed') {
    throw new HttpError(
      409,
      LedgerReason.TransactionReversed,
      'the payment of this transaction was reversed; nothing to refund',
    );
  }
  const remaining = txn.amount_micro - txn.refunded_micro;
  if (amountMicro <= 0n) throw badRequest('amount', 'must be greater than 0');
  if (amountMicro > remaining) {
    throw new HttpError(
      409,
      LedgerReason.AmountExceedsRefundable,
      `amount exceeds what remains refundable (${formatUsdc(remaining)} USDC)`,
      {
        field: 'amount',
        rule: `must be at most ${formatUsdc(remaining)}`,
        refundable: formatUsdc(remaining),
      },
    );
  }
}

/**
 * Every refund is an escrow transfer on its one nonce, ahead of payouts: one below REFUND_MIN_AMOUNT (400), or a
 * partial one beyond REFUND_MAX_PARTIAL_PER_TRANSACTION (409), is refused, so a payment cannot be split into dust.
 * All that remains is always accepted. Called with the transaction locked, so concurrent refunds count each other.
 */
async function assertNotDust(
  trx: LedgerTrx,
  limits: { refundMinAmountMicro: bigint; refundMaxPartialPerTransaction: number },
  txn: TransactionForRefund,
  amountMicro: bigint,
): Promise<void> {
  const remaining = txn.amount_micro - txn.refunded_micro;
  if (amountMicro === remaining) return;
  const minimum = formatUsdc(limits.refundMinAmountMicro);
  if (amountMicro < limits.refundMinAmountMicro) {
    throw new HttpError(
      400,
      LedgerReason.InvalidRequest,
      `amount must be at least ${minimum} USDC, or all that remains refundable (${formatUsdc(remaining)} USDC)`,
      {
        field: 'amount',
        rule: `must be at least ${minimum} USDC, or all that remains refundable (${formatUsdc(remaining)})`,
        minimum,
        refundable: formatUsdc(remaining),
      },
    );
  }
  const booked = await sql<{ n: number }>`select count(*)::int as n from refunds
      where transaction_id = ${txn.id}`.execute(trx);
  const max = limits.refundMaxPartialPerTransaction;
  if (Number(booked.rows[0]?.n ?? 0) >= max) {
    throw new HttpError(
      409,
      LedgerReason.TooManyPartialRefunds,
      `this transaction has had ${max} partial refunds: only a refund of all that remains (${formatUsdc(remaining)} USDC) is accepted`,
      {
        field: 'amount',
        rule: `after ${max} partial refunds only all that remains refundable (${formatUsdc(remaining)}) is accepted`,
        refundable: formatUsdc(remaining),
        maxPartialRefunds: max,
      },
    );
  }
}

/** The cumulative fee split: partial refunds add up exactly to the payment's original shares. */
export function splitRefund(txn: TransactionForRefund, amountMicro: bigint): RefundSplit {
  const refundedAfter = txn.refunded_micro + amountMicro;
  const sellerPart = splitFee(refundedAfter).sellerMicro - txn.refunded_seller_micro;
  return {
    amountMicro,
    refundedAfter,
    sellerPart,
    platformPart: amountMicro - sellerPart,
    phase: txn.escrow_status === 'held' ? 'in_escrow' : 'after_release',
  };
}

/** While held the parts come out of the holds; after release out of seller available and platform revenue. */
export function refundEntryLines(sellerId: string, split: RefundSplit) {
  const held = split.phase === 'in_escrow';
  return [
    debit(held ? 'seller_held' : 'seller_available', split.sellerPart, sellerId),
    debit(held ? 'platform_held' : 'platform_revenue', split.platformPart),
    credit('refund_pending', split.amountMicro),
  ];
}

async function recordRefund(
  trx: LedgerTrx,
  txn: TransactionForRefund,
  split: RefundSplit,
  refund: { id: string; reason: string; refundRequestId: string | null; now: Date },
): Promise<RefundRow> {
  await sql`update transactions set refunded_micro = refunded_micro + ${split.amountMicro},
        refunded_seller_micro = refunded_seller_micro + ${split.sellerPart},
        refunded_platform_micro = refunded_platform_micro + ${split.platformPart}
      where id = ${txn.id}`.execute(trx);
  const row =
    await sql<RefundRow>`insert into refunds (id, transaction_id, seller_id, payer, chain_id, amount_micro,
        seller_part_micro, platform_part_micro, phase, reason, status, refund_request_id, created_at)
      values (${refund.id}, ${txn.id}, ${txn.seller_id}, ${txn.payer}, ${txn.chain_id}, ${split.amountMicro}, ${split.sellerPart},
        ${split.platformPart}, ${split.phase}, ${refund.reason}, 'pending', ${refund.refundRequestId}, ${refund.now})
      returning *`.execute(trx);
  return row.rows[0]!;
}

/**
 * Books a refund on a locked transaction and asks settlement to send it (refund.initiated); the seller must still
 * have the money with Paygate (checkSellerCanPay).
 */
export async function bookRefund(
  trx: LedgerTrx,
  deps: LedgerDeps,
  txn: TransactionForRefund,
  input: {
    amountMicro: bigint;
    reason: string;
    refundRequestId?: string | null;
    /** false: booked without refund.initiated; the transfer goes out later with others (an unserved batch). */
    initiate?: boolean;
  },
): Promise<RefundRow> {
  assertRefundable(txn, input.amountMicro);
  await assertNotDust(trx, deps.config, txn, input.amountMicro);
  const split = splitRefund(txn, input.amountMicro);
  await checkSellerCanPay(trx, txn.seller_id, split.phase, split.sellerPart, split.platformPart);
  const refundId = newRefundId();
  const now = deps.now();
  await postEntry(trx, {
    idempotencyKey: `refund:${refundId}`,
    entryType: 'refund',
    transactionId: txn.id,
    lines: refundEntryLines(txn.seller_id, split),
    memo: { refundId, phase: split.phase },
  });
  const row = await recordRefund(trx, txn, split, {
    id: refundId,
    reason: input.reason,
    refundRequestId: input.refundRequestId ?? null,
    now,
  });
  if (input.initiate !== false) {
    await enqueueEvent(
      trx,
      createEvent('refund.initiated', 'escrow-ledger', {
        refundId,
        transactionId: txn.id,
        sellerId: txn.seller_id,
        payer: txn.payer,
        amount: formatUsdc(input.amountMicro),
        chainId: txn.chain_id,
        initiatedAt: now.toISOString(),
      }),
    );
  }
  // The caller's locked transaction stays current for a further refund in the same database transaction.
  txn.refunded_micro = split.refundedAfter;
  txn.refunded_seller_micro += split.sellerPart;
  deps.metrics.refundsBooked.inc({ phase: split.phase });
  return row;
}

/**
 * The seller's money with Paygate (available may be negative: owed, covered by held money or credit): locks every
 * account a payment refund posts to, in id order (post_entry's balance trigger's order, so a refund never
 * deadlocks with a release or a payment batch); a concurrent refund of the seller waits here for this one.
 */
async function lockSellerFunds(trx: LedgerTrx, sellerId: string) {
  const accounts: Array<[AccountKind, string]> = [
    ['platform_held', ''],
    ['platform_revenue', ''],
    ['refund_pending', ''],
    ['seller_available', sellerId],
    ['seller_held', sellerId],
  ];
  // Missing accounts are created first, in the global (kind, owner) order book_payments uses.
  await ensureAccounts(trx, accounts);
  const rows = await sql<Row<'accounts', 'kind' | 'balance_micro'>>`select kind, balance_micro from accounts
      where (kind, owner) in (('platform_held', ''), ('platform_revenue', ''), ('refund_pending', ''),
        ('seller_available', ${sellerId}), ('seller_held', ${sellerId}))
      order by id for no key update`.execute(trx);
  const balance = (kind: AccountKind) => rows.rows.find((r) => r.kind === kind)?.balance_micro ?? 0n;
  const limit = await trx
    .selectFrom('seller_credit_limits')
    .select('credit_limit_micro')
    .where('seller_id', '=', sellerId)
    .executeTakeFirst();
  return {
    held: balance('seller_held'),
    available: balance('seller_available'),
    creditLimit: limit?.credit_limit_micro ?? 0n,
    platformRevenue: balance('platform_revenue'),
  };
}

/**
 * Escrow is shared: a refund is paid only from what the seller still has with Paygate (held + available + the
 * operator's credit), else other sellers' money would pay it: 409 insufficient_seller_balance, naming the shortfall.
 * Checked under the account locks, in the transaction that books the refund.
 */
async function checkSellerCanPay(
  trx: LedgerTrx,
  sellerId: string,
  phase: RefundPhase,
  sellerPart: bigint,
  platformPart: bigint,
): Promise<void> {
  const funds = await lockSellerFunds(trx, sellerId);
  const shortfall = sellerPart - (funds.held + funds.available + funds.creditLimit);
  if (shortfall > 0n) {
    throw new HttpError(
      409,
      LedgerReason.InsufficientSellerBalance,
      `the seller's money with Paygate (held + available) does not cover this refund: ${formatUsdc(shortfall)} USDC short; a refund is paid only from what the seller still has (or an operator's credit)`,
      {
        field: 'amount',
        rule: `the seller part (${formatUsdc(sellerPart)}) must be covered by held + available + credit limit`,
        available: formatUsdc(funds.available),
        held: formatUsdc(funds.held),
        creditLimit: formatUsdc(funds.creditLimit),
        sellerAmount: formatUsdc(sellerPart),
        shortfall: formatUsdc(shortfall),
      },
    );
  }
  // The platform returns its fee from its revenue; after a treasury payout it may not hold enough.
  if (phase === 'after_release' && platformPart > funds.platformRevenue) {
    throw new HttpError(
      409,
      LedgerReason.InsufficientPlatformRevenue,
      'the platform revenue does not cover its fee returned by this refund; the operator must fund it first',
      {
        platformRevenue: formatUsdc(funds.platformRevenue),
        shortfall: formatUsdc(platformPart - funds.platformRevenue),
      },
    );
  }
}

/** Settlement sent the refund on chain: the USDC left escrow (every kind sits in refund_pending until then). */
export async function onRefundCompleted(
  trx: LedgerTrx,
  event: TypedEnvelope<'refund.completed'>,
  deps: LedgerDeps,
): Promise<void> {
  const d = event.data;
  const result = await sql<RefundRow>`select * from refunds where id = ${d.refundId} for update`.execute(trx);
  const refund = result.rows[0];
  if (!refund) throw new UnknownRecordError('refund.completed', 'refund', d.refundId);
  if (refund.status === 'completed') return;
  if (parseChainUsdc(d.amount) !== refund.amount_micro) {
    deps.logger.error(
      { refundId: refund.id, booked: formatUsdc(refund.amount_micro), sent: d.amount },
      'refund.completed amount differs from the booked refund; booking the booked amount',
    );
  }
  const now = deps.now();
  await postEntry(trx, {
    idempotencyKey: `refund_completed:${refund.id}`,
    entryType: 'refund_sent',
    transactionId: refund.transaction_id,
    lines: [debit('refund_pending', refund.amount_micro), credit('escrow_asset', refund.amount_micro)],
    memo: { refundId: refund.id, refundTxHash: d.refundTxHash },
  });
  const completed = {
    status: 'completed',
    refund_tx_hash: d.refundTxHash.toLowerCase(),
    completed_at: now,
  } as const;
  await trx.updateTable('refunds').set(completed).where('id', '=', refund.id).execute();
  if (refund.kind === 'unserved_batch') {
    // The refunds the batch carried were booked one by one; the transfer that sent them is theirs too.
    await trx
      .updateTable('refunds')
      .set(completed)
      .where('id', 'in', (eb) =>
        eb.selectFrom('unserved_calls').select('refund_id').where('batch_id', '=', refund.id),
      )
      .where('status', '=', 'pending')
      .execute();
  }
  if (refund.refund_request_id) {
    await trx
      .updateTable('refund_requests')
      .set({ status: 'completed', completed_at: now })
      .where('id', '=', refund.refund_request_id)
      .where('status', '=', 'approved')
      .execute();
  }
}

export function refundView(row: RefundRow) {
  return {
    refundId: row.id,
    transactionId: row.transaction_id,
    amount: formatUsdc(row.amount_micro),
    sellerAmount: formatUsdc(row.seller_part_micro),
    platformFeeReturned: formatUsdc(row.platform_part_micro),
    phase: row.phase,
    status: row.status,
    reason: row.reason,
    refundRequestId: row.refund_request_id,
    refundTxHash: row.refund_tx_hash,
    createdAt: new Date(row.created_at).toISOString(),
    completedAt: row.completed_at ? new Date(row.completed_at).toISOString() : null,
  };
}
