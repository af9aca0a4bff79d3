import { badRequest, HttpError } from '@paygate/http';
import type { RefundTarget } from '@paygate/protocol';
import { sql } from 'kysely';
import type { LedgerDb, LedgerTrx, TransactionRow } from '../db';
import type { LedgerDeps } from '../deps';
import { LedgerReason } from '../reasons';

/** Exactly one of transactionId, txHash (with an optional logIndex) or sessionId names the payment. */
export function refundTargetOf(body: {
  transactionId?: string;
  txHash?: string;
  logIndex?: number;
  sessionId?: string;
}): RefundTarget {
  const given = [body.transactionId, body.txHash, body.sessionId].filter((v) => v !== undefined).length;
  if (given !== 1) {
    throw badRequest(
      'transactionId',
      'must be given, or txHash or sessionId instead (exactly one of the three)',
    );
  }
  if (body.logIndex !== undefined && body.txHash === undefined) {
    throw badRequest('logIndex', 'is only allowed with txHash');
  }
  if (body.transactionId !== undefined) return { transactionId: body.transactionId };
  if (body.sessionId !== undefined) return { sessionId: body.sessionId };
  return body.logIndex === undefined
    ? { txHash: body.txHash!.toLowerCase() }
    : { txHash: body.txHash!.toLowerCase(), logIndex: body.logIndex };
}

const notBooked = (what: string) =>
  new HttpError(
    404,
    LedgerReason.TransactionNotFound,
    `no payment on the books for this ${what} (yet: a payment is booked seconds after it is confirmed)`,
  );

/** The ledger transaction a target names (the standing one after a reorg's re-booking), or 404 transaction_not_found. */
export async function findRequestedTransaction(
  db: LedgerDb | LedgerTrx,
  deps: LedgerDeps,
  target: RefundTarget,
): Promise<TransactionRow> {
  const standingFirst = sql`order by (escrow_status = 'reversed'), created_at desc, id desc limit 20`;
  const [named, where] =
    'transactionId' in target
      ? (['transactionId', sql`id = ${target.transactionId}`] as const)
      : 'sessionId' in target
        ? (['sessionId', sql`session_id = ${target.sessionId} ${standingFirst}`] as const)
        : ([
            'txHash',
            sql`chain_id = ${deps.config.chainId} and tx_hash = ${target.txHash}
              and (${target.logIndex ?? null}::integer is null or log_index = ${target.logIndex ?? null})
              ${standingFirst}`,
          ] as const);
  const { rows } = await sql<TransactionRow>`select * from transactions where ${where}`.execute(db);
  if (!rows[0]) throw notBooked(named);
  if (named === 'txHash' && new Set(rows.map((r) => r.log_index)).size > 1) {
    throw badRequest('logIndex', 'is required: this transaction made several payments into escrow');
  }
  return rows[0];
}

export async function findTransactionForUpdate(
  trx: LedgerTrx,
  deps: LedgerDeps,
  target: RefundTarget,
): Promise<TransactionRow> {
  const found = await findRequestedTransaction(trx, deps, target);
  const locked =
    await sql<TransactionRow>`select * from transactions where id = ${found.id} for update`.execute(trx);
  return locked.rows[0]!;
}
