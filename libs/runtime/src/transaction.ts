import type { Kysely, Transaction } from 'kysely';

/** Deadlock and serialization failure: nothing of the aborted transaction was kept, so it may run again. */
const CONFLICT_CODES = new Set(['40P01', '40001']);

/** How often a transaction aborted by a conflict runs at most (the first run included). */
const TRANSACTION_CONFLICT_ATTEMPTS = 3;

export function isTransactionConflict(error: unknown): boolean {
  return CONFLICT_CODES.has((error as { code?: string } | undefined)?.code ?? '');
}

/** Runs `fn` in a transaction, again after a conflict (bounded); `fn` must keep every effect inside it. */
export async function transactionRetryingConflicts<DB, T>(
  db: Kysely<DB>,
  fn: (trx: Transaction<DB>) => Promise<T>,
  onConflict: (error: unknown, attempt: number) => void,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await db.transaction().execute(fn);
    } catch (error) {
      if (!isTransactionConflict(error) || attempt >= TRANSACTION_CONFLICT_ATTEMPTS) throw error;
      onConflict(error, attempt);
      // Apart, so the two sides of a deadlock do not meet again at once.
      await new Promise((resolve) => setTimeout(resolve, 5 + Math.random() * 20 * attempt));
    }
  }
}
