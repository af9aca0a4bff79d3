import { sql } from 'kysely';
import type { AccountKind, LedgerDb, LedgerTrx } from '../db';

interface EntryLine {
  kind: AccountKind;
  /** The seller id for per-seller accounts; empty for the single platform-wide ones. */
  owner: string;
  side: 'debit' | 'credit';
  amountMicro: bigint;
}

const lineOn =
  (side: EntryLine['side']) =>
  (kind: AccountKind, amountMicro: bigint, owner = ''): EntryLine => ({ kind, owner, side, amountMicro });
export const debit = lineOn('debit');
export const credit = lineOn('credit');

interface EntryInput {
  /** Unique per effect: a repeated key posts nothing (the effect is already on the books). */
  idempotencyKey: string;
  entryType: string;
  transactionId?: string | null;
  reversesEntryId?: bigint | null;
  lines: EntryLine[];
  memo?: Record<string, unknown>;
}

function linesOf(input: EntryInput) {
  return input.lines.map((l) => {
    if (l.amountMicro < 0n) throw new RangeError(`negative line amount in ${input.idempotencyKey}`);
    return { kind: l.kind, owner: l.owner, side: l.side, amount: l.amountMicro.toString() };
  });
}

/** Posts one entry (`post_entry` refuses it unbalanced or below a floor); null when its key was used. */
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
 * Posts many entries in one statement (`post_entries`, postEntry's checks), locking their balance rows in account
 * id order until the commit: posted last, the shared accounts are held the shortest time. Not reversals.
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
 * Creates missing accounts in the one global (kind, owner) order post_entries uses, before the transaction locks
 * any balance row: creating one while holding balance rows deadlocks with a transaction that created it
 * uncommitted and waits for one of those rows (refund-deadlock.test.ts).
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

/** Locks (creating if needed) one account row, NO KEY UPDATE as the balance trigger, and returns its balance. */
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
