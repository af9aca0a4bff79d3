import { sql } from 'kysely';
import type { AccountKind, LedgerDb, LedgerTrx } from '../db';

/** The account kinds live with the schema (db.ts); re-exported for the entry builders' callers. */
export type { AccountKind };

export interface EntryLine {
  kind: AccountKind;
  /** The seller id for per-seller accounts; empty for the single platform-wide ones. */
  owner?: string;
  side: 'debit' | 'credit';
  amountMicro: bigint;
}

export const debit = (kind: AccountKind, amountMicro: bigint, owner = ''): EntryLine => ({
  kind,
  owner,
  side: 'debit',
  amountMicro,
});
export const credit = (kind: AccountKind, amountMicro: bigint, owner = ''): EntryLine => ({
  kind,
  owner,
  side: 'credit',
  amountMicro,
});

export interface EntryInput {
  /** Unique per effect: a repeated key posts nothing (the effect is already on the books). */
  idempotencyKey: string;
  entryType: string;
  transactionId?: string | null;
  reversesEntryId?: bigint | null;
  lines: EntryLine[];
  memo?: Record<string, unknown>;
}

/** An entry's lines as the database functions read them, refusing a negative amount. */
function linesOf(input: EntryInput) {
  return input.lines.map((l) => {
    if (l.amountMicro < 0n) throw new RangeError(`negative line amount in ${input.idempotencyKey}`);
    return { kind: l.kind, owner: l.owner ?? '', side: l.side, amount: l.amountMicro.toString() };
  });
}

/**
 * Posts one journal entry through the database function `post_entry`, which refuses an unbalanced entry
 * (at commit), a balance below its account's floor, and a repeated idempotency key (returns null then).
 */
export async function postEntry(trx: LedgerTrx, input: EntryInput): Promise<bigint | null> {
  const lines = JSON.stringify(linesOf(input));
  const result = await sql<{
    id: bigint | null;
  }>`select post_entry(${input.idempotencyKey}, ${input.entryType},
      ${input.transactionId ?? null}, ${input.reversesEntryId ?? null}, ${lines}::jsonb, ${input.memo ? JSON.stringify(input.memo) : null}::jsonb) as id`.execute(
    trx,
  );
  return result.rows[0]?.id ?? null;
}

/**
 * Posts many entries in one statement (the database function `post_entries`: the same checks as postEntry, a
 * repeated key posts nothing). The balance rows it touches are locked by that one statement, in account id order,
 * until the commit: posting last in a transaction holds the shared accounts (platform_held, suspense) for the
 * shortest time. Reversals are posted one by one (postEntry).
 */
export async function postEntries(trx: LedgerTrx, inputs: EntryInput[]): Promise<void> {
  if (inputs.length === 0) return;
  const entries = inputs.map((input) => {
    if (input.reversesEntryId != null)
      throw new RangeError(`reversal ${input.idempotencyKey}: use postEntry`);
    return {
      key: input.idempotencyKey,
      type: input.entryType,
      transactionId: input.transactionId ?? null,
      lines: linesOf(input),
      memo: input.memo ?? null,
    };
  });
  await sql`select post_entries(${JSON.stringify(entries)}::jsonb)`.execute(trx);
}

/**
 * Creates the accounts a transaction will post to that do not exist yet, in the one global (kind, owner) order
 * post_entries and refunds use, before the transaction locks any balance row. Creating an account while
 * holding balance rows deadlocks: another transaction may have created the same account (its insert not yet
 * committed, so ours waits for it) and be waiting for one of those rows (make chaos: a refund against the
 * hold release, services/escrow-ledger/test/refund-deadlock.test.ts).
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

/**
 * Locks (creating if needed) one account row and returns its balance: serialises decisions on it. NO KEY UPDATE,
 * as the balance trigger takes.
 */
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

export function transferKey(chainId: number, txHash: string, logIndex: number): string {
  return `${chainId}:${txHash.toLowerCase()}:${logIndex}`;
}
