import { type Kysely, sql } from 'kysely';

/**
 * Another transaction holds `table` (access exclusive) until `release()`: every read of it waits meanwhile, so a
 * test can let an event be consumed while a cache's read is in flight. Resolves once the lock is held.
 */
export async function holdTableLock<DB>(
  db: Kysely<DB>,
  table: string,
): Promise<{ release(): Promise<void> }> {
  let letGo!: () => void;
  const released = new Promise<void>((resolve) => (letGo = resolve));
  let locked!: () => void;
  const lockTaken = new Promise<void>((resolve) => (locked = resolve));
  const holder = db.transaction().execute(async (trx) => {
    await sql`lock table ${sql.table(table)} in access exclusive mode`.execute(trx);
    locked();
    await released;
  });
  await Promise.race([lockTaken, holder]);
  return {
    async release() {
      letGo();
      await holder;
    },
  };
}
