/**
 * Statements marked with preparedStatement are prepared once per pooled connection and run by name after that,
 * with their parameters, inside transactions too; other statements are not prepared; a name must be an identifier.
 */
import { createTestEnvironment, type TestEnvironment } from '@paygate/testing';
import { type Kysely, sql } from 'kysely';
import { createDatabase, preparedStatement } from '../src';

let env: TestEnvironment;
let db: Kysely<any>;

beforeAll(async () => {
  env = await createTestEnvironment('prepared');
  // One connection, so every statement below meets the statements prepared on it before.
  db = createDatabase<any>({ url: env.databaseUrl, schema: 'public', poolSize: 1 });
});

afterAll(async () => {
  await db?.destroy();
  await env?.cleanup();
});

const prepared = async () =>
  (await sql<{ name: string }>`select name from pg_prepared_statements order by name`.execute(db)).rows.map(
    (row) => row.name,
  );

describe('preparedStatement', () => {
  it('prepares a marked statement once on a connection and runs it with each call’s parameters', async () => {
    const doubled = async (n: number) =>
      (
        await sql<{ v: number }>`${preparedStatement('test_doubled')} select ${n}::integer * 2 as v`.execute(
          db,
        )
      ).rows[0]!.v;
    expect(await prepared()).toEqual([]);
    expect(await doubled(2)).toBe(4);
    expect(await doubled(21)).toBe(42);
    expect(await prepared()).toEqual(['test_doubled']);
    await db.transaction().execute(async (trx) => {
      const inside = await sql<{
        v: number;
      }>`${preparedStatement('test_doubled')} select ${5}::integer * 2 as v`.execute(trx);
      expect(inside.rows[0]!.v).toBe(10);
    });
    // A statement without the mark, and the reads of pg_prepared_statements, are not prepared.
    await sql`select ${1}::integer as one`.execute(db);
    expect(await prepared()).toEqual(['test_doubled']);
  });

  it('keeps working after a migration adds a column when its result columns are named, unlike `*`', async () => {
    await sql`create table prepared_probe (id integer primary key)`.execute(db);
    await sql`insert into prepared_probe values (1)`.execute(db);
    const named = () =>
      sql<{
        id: number;
      }>`${preparedStatement('test_named')} select id from prepared_probe where id = ${1}`.execute(db);
    const starred = () =>
      sql`${preparedStatement('test_starred')} select * from prepared_probe where id = ${1}`.execute(db);
    await named();
    await starred();
    await sql`alter table prepared_probe add column note text`.execute(db);
    expect((await named()).rows).toEqual([{ id: 1 }]);
    await expect(starred()).rejects.toThrow('cached plan must not change result type');
  });

  it('refuses a name that is not a lowercase identifier', () => {
    expect(() => preparedStatement('x; drop table')).toThrow('lowercase letters, digits, _');
    expect(() => preparedStatement('Upper')).toThrow('prepared statement name Upper');
  });
});
