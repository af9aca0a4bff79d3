import { sql } from 'kysely';
import type { AccountKind, LedgerDb, LedgerTrx } from '../db';

export interface EntryLine {
  kind: AccountKind;
  /** The seller id for per-seller accounts; empty for the single platform-wide ones. */
  owner?: string;
  side: 'debit' | 'credit';
  amountMicro: bigint;
}

const lineOn =
  (side: EntryLine['side']) =>
  (kind: AccountKind, amountMicro: bigint, owner = ''): EntryLine => ({ kind, owner, side, amountMicro });
export const debit = lineOn('debit');
export const credit = lineOn('credit');

export interface EntryInput {
  /** Unique per effect: a repeated key posts nothing (the effect is already on the books). */
  idempotencyKey: string;
  entryType: string;
  transactionId?: string | null;
  reversesEntryId?: bigint | null;
  lines: EntryLine[];
  memo?: Record<string, unknown>;
}

/** Posts one entry by `post_entry` (refuses unbalanced ones, floors); null for a repeated idempotency key. */
export async function postEntry(trx: LedgerTrx, input: EntryInput): Promise<bigint | null> {
  for (const line of input.lines) {
    if (line.amountMicro < 0n) throw new RangeError(`negative line amount in ${input.idempotencyKey}`);
  }
  const lines = JSON.stringify(
    input.lines.map((l) => ({
      kind: l.kind,
      owner: l.owner ?? '',
      side: l.side,
      amount: l.amountMicro.toString(),
    })),
  );
  const result = await sql<{
    id: bigint | null;
  }>`select post_entry(${input.idempotencyKey}, ${input.entryType},
      ${input.transactionId ?? null}, ${input.reversesEntryId ?? null}, ${lines}::jsonb, ${input.memo ? JSON.stringify(input.memo) : null}::jsonb) as id`.execute(
    trx,
  );
  return result.rows[0]?.id ?? null;
}

/**
 * Creates the accounts a transaction will post to, in post_entries' global (kind, owner) order, before it locks any
 * balance row: creating one while holding balance rows deadlocks against a transaction creating the same account.
 */
export async function ensureAccounts(
  trx: LedgerTrx,
  accounts: ReadonlyArray<readonly [AccountKind, string]>,
): Promise<void> {
  const keys = [...new Set(accounts.map(([kind, owner]) => `${kind}\u0000${owner}`))].sort();
  // Kinds and owners are lowercase ASCII with underscores: code-unit order is post_entries' `order by 1, 2`.
  const unique = keys.map((key) => key.split('\u0000') as [AccountKind, string]);
  for (const [kind, owner] of unique) await sql`select ledger_account(${kind}, ${owner})`.execute(trx);
}

export async function entryIdByKey(db: LedgerDb, idempotencyKey: string): Promise<bigint | null> {
  const row = await db
    .selectFrom('journal_entries')
    .select('id')
    .where('idempotency_key', '=', idempotencyKey)
    .executeTakeFirst();
  return row?.id ?? null;
}

/** Balance of one account in its normal direction (0 for an account that has never been posted to). */
export async function accountBalance(db: LedgerDb, kind: AccountKind, owner = ''): Promise<bigint> {
  const row = await db
    .selectFrom('accounts')
    .select('balance_micro')
    .where('kind', '=', kind)
    .where('owner', '=', owner)
    .executeTakeFirst();
  return row?.balance_micro ?? 0n;
}

/** Locks (creating) one account row, returning its balance; NO KEY UPDATE, as the balance trigger takes. */
export async function lockAccount(trx: LedgerTrx, kind: AccountKind, owner = ''): Promise<bigint> {
  await sql`select ledger_account(${kind}, ${owner})`.execute(trx);
  const row = await trx
    .selectFrom('accounts')
    .select('balance_micro')
    .where('kind', '=', kind)
    .where('owner', '=', owner)
    .forNoKeyUpdate()
    .executeTakeFirstOrThrow();
  return row.balance_micro;
}

/** A transaction-scoped advisory lock: serialises everything done under `key` until the commit. */
export const advisoryLock = (trx: LedgerTrx, key: string) =>
  sql`select pg_advisory_xact_lock(hashtextextended(${key}, 0))`.execute(trx);

export function transferKey(chainId: number, txHash: string, logIndex: number): string {
  return `${chainId}:${txHash.toLowerCase()}:${logIndex}`;
}
