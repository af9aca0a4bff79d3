import { openSchema, randomSuffix } from '@paygate/testing';
import { type Kysely, sql, type Transaction } from 'kysely';
import { dropSchema, isTransactionConflict, transactionRetryingConflicts } from '../src';

/**
 * Two transactions that lock rows a and b in opposite orders deadlock on their first run (each waits at a barrier
 * until the other holds its first row); Postgres aborts one of them (40P01) after deadlock_timeout.
 */
describe('transactions aborted by a deadlock run again (bounded)', () => {
  const schema = `txc_${randomSuffix()}`;
  let db: Kysely<any>;

  beforeAll(async () => {
    db = openSchema(schema);
    await sql`create schema if not exists ${sql.id(schema)}`.execute(db);
    await sql`create table counters (name text primary key, n integer not null)`.execute(db);
    await sql`insert into counters values ('a', 0), ('b', 0)`.execute(db);
  });
  afterAll(async () => {
    await dropSchema(db, schema);
    await db.destroy();
  });

  /** Two opposite-order lockers whose first runs meet at a barrier, so the first runs always deadlock. */
  function opposedLockers() {
    let arrived = 0;
    let release!: () => void;
    const bothHoldTheirFirstRow = new Promise<void>((resolve) => {
      release = resolve;
    });
    const runs = { first: 0, second: 0 };
    const locker = (name: 'first' | 'second', order: [string, string]) => async (trx: Transaction<any>) => {
      runs[name]++;
      await sql`update counters set n = n + 1 where name = ${order[0]}`.execute(trx);
      if (runs[name] === 1) {
        if (++arrived === 2) release();
        await bothHoldTheirFirstRow;
      }
      await sql`update counters set n = n + 1 where name = ${order[1]}`.execute(trx);
      return name;
    };
    return { runs, first: locker('first', ['a', 'b']), second: locker('second', ['b', 'a']) };
  }

  const counters = async () =>
    Object.fromEntries(
      (await sql<{ name: string; n: number }>`select name, n from counters`.execute(db)).rows.map((r) => [
        r.name,
        r.n,
      ]),
    );

  test('without the retry, one of the two fails with deadlock_detected and its updates are lost', async () => {
    const before = await counters();
    const { first, second } = opposedLockers();
    const outcomes = await Promise.allSettled([
      db.transaction().execute(first),
      db.transaction().execute(second),
    ]);
    const failed = outcomes.filter((o) => o.status === 'rejected');
    expect(failed).toHaveLength(1);
    expect(isTransactionConflict((failed[0] as PromiseRejectedResult).reason)).toBe(true);
    const after = await counters();
    expect(after.a! - before.a! + (after.b! - before.b!)).toBe(2);
  });

  test('with the retry, both commit: the aborted one ran again once, every update kept', async () => {
    const before = await counters();
    const { runs, first, second } = opposedLockers();
    const conflicts: number[] = [];
    const onConflict = (_error: unknown, attempt: number) => conflicts.push(attempt);
    const results = await Promise.all([
      transactionRetryingConflicts(db, first, onConflict),
      transactionRetryingConflicts(db, second, onConflict),
    ]);
    expect(results).toEqual(['first', 'second']);
    expect(conflicts).toEqual([1]);
    expect(runs.first + runs.second).toBe(3);
    const after = await counters();
    expect(after.a! - before.a!).toBe(2);
    expect(after.b! - before.b!).toBe(2);
  });

  test('any other error is not retried', async () => {
    let runs = 0;
    await expect(
      transactionRetryingConflicts(
        db,
        async (trx) => {
          runs++;
          await sql`insert into counters values ('a', 0)`.execute(trx);
        },
        () => undefined,
      ),
    ).rejects.toThrow(/duplicate key/);
    expect(runs).toBe(1);
  });
});
