import { openSchema, randomSuffix } from '@paygate/testing';
import { type Kysely, sql } from 'kysely';
import { applyRepeatableSql, dropSchema, migrateToLatest } from '../src';

const migrations = {
  '2026-11-22-0100-numbers': {
    up: async (db: Kysely<any>) => {
      await sql`create table numbers (n integer not null)`.execute(db);
    },
  },
};
const version = (factor: number) => ({
  name: 'numbers.sql',
  sql: `create or replace function scaled(p integer) returns integer language sql as $$ select p * ${factor} $$;
        create or replace view scaled_numbers as select scaled(n) as s from numbers;`,
});

describe('repeatable SQL: functions and views defined once, re-applied when their text changes', () => {
  const schema = `rsql_${randomSuffix()}`;
  let db: Kysely<any>;

  beforeAll(() => {
    db = openSchema(schema);
  });
  afterAll(async () => {
    await dropSchema(db, schema);
    await db.destroy();
  });

  const scaled = async () => (await sql<{ v: number }>`select scaled(3) as v`.execute(db)).rows[0]?.v;
  const appliedAt = async () =>
    (
      await sql<{
        applied_at: Date;
      }>`select applied_at from repeatable_sql where name = 'numbers.sql'`.execute(db)
    ).rows[0]?.applied_at;

  test('applied after the migrations, skipped while unchanged, re-applied when changed', async () => {
    await migrateToLatest(db, schema, migrations, undefined, [version(2)]);
    expect(await scaled()).toBe(6);
    const first = await appliedAt();

    await migrateToLatest(db, schema, migrations, undefined, [version(2)]);
    expect(await appliedAt()).toEqual(first);

    await migrateToLatest(db, schema, migrations, undefined, [version(5)]);
    expect(await scaled()).toBe(15);
    expect((await appliedAt())!.getTime()).toBeGreaterThanOrEqual(first!.getTime());
  });

  test('replicas starting together apply it without error, and a failing script changes nothing', async () => {
    await Promise.all([1, 2, 3].map(() => applyRepeatableSql(db, schema, [version(7)])));
    expect(await scaled()).toBe(21);

    const broken = { name: 'numbers.sql', sql: `${version(9).sql} select no_such_function();` };
    await expect(applyRepeatableSql(db, schema, [broken])).rejects.toThrow(/no_such_function/);
    expect(await scaled()).toBe(21);
  });
});
