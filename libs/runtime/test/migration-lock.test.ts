import { openSchema, randomSuffix } from '@paygate/testing';
import { type Kysely, type Migration, sql } from 'kysely';
import { dropSchema, migrateToLatest } from '../src';

/** A migration that starts, then waits until the test lets it finish. */
function heldMigration() {
  let release!: () => void;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  let started!: () => void;
  const running = new Promise<void>((resolve) => {
    started = resolve;
  });
  const migration: Migration = {
    up: async (db) => {
      started();
      await released;
      await sql`create table held (n integer)`.execute(db);
    },
  };
  return { migration, running, release };
}

const createsTable: Migration = {
  up: async (db) => {
    // Fails if it runs twice.
    await sql`create table once (n integer)`.execute(db);
  },
};

describe("the migration lock is the schema's", () => {
  const schemaA = `mlock_a_${randomSuffix()}`;
  const schemaB = `mlock_b_${randomSuffix()}`;
  let a: Kysely<any>;
  let b: Kysely<any>;

  beforeAll(() => {
    a = openSchema(schemaA);
    b = openSchema(schemaB);
  });
  afterAll(async () => {
    await dropSchema(a, schemaA);
    await dropSchema(b, schemaB);
    for (const db of [a, b]) await db.destroy();
  });

  it("migrates another service's schema while one schema's migrations run", async () => {
    const held = heldMigration();
    const migratingA = migrateToLatest(a, schemaA, { '2026-11-27-0100-held': held.migration });
    await held.running;
    // Before, kysely's one lock for the whole database made this wait for schema A.
    await migrateToLatest(b, schemaB, { '2026-11-27-0100-once': createsTable });
    expect((await sql<{ n: number }>`select count(*)::int as n from once`.execute(b)).rows[0]!.n).toBe(0);
    held.release();
    await migratingA;
  });

  it('starts replicas of one service together on a new database: one creates the schema, each migration runs once', async () => {
    const migrations = { '2026-11-27-0200-once': createsTable };
    const schema = `mlock_c_${randomSuffix()}`;
    const replicas = Array.from({ length: 6 }, () => openSchema(schema));
    try {
      await Promise.all(replicas.map((db) => migrateToLatest(db, schema, migrations)));
      const applied = await sql<{ n: number }>`select count(*)::int as n from kysely_migration`.execute(
        replicas[0]!,
      );
      expect(applied.rows[0]!.n).toBeGreaterThanOrEqual(1);
      expect(
        (await sql<{ n: number }>`select count(*)::int as n from once`.execute(replicas[0]!)).rows[0]!.n,
      ).toBe(0);
    } finally {
      await dropSchema(replicas[0]!, schema);
      for (const db of replicas) await db.destroy();
    }
  });
});
