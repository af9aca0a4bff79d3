import { createTestEnvironment, holdTableLock, openSchema, type TestEnvironment } from '@paygate/testing';
import type { Kysely } from 'kysely';
import { applySkillUpdated, SkillDirectory } from '../src/skills/projection';
import { skillSnapshot } from './harness';

describe("the gateway's skill directory", () => {
  let env: TestEnvironment;
  let db: Kysely<any>;
  beforeAll(async () => {
    env = await createTestEnvironment('skilldir');
    db = openSchema(env.schemaFor('gateway-proxy'));
  });
  afterAll(async () => {
    await db?.destroy();
    await env?.cleanup();
  });

  it('keeps no skill read before an invalidation: it may be the revision with the old price', async () => {
    const before = skillSnapshot({ name: 'repriced', apiBaseUrl: 'http://127.0.0.1:9' });
    await db.transaction().execute((trx) => applySkillUpdated(trx, before));
    const directory = new SkillDirectory(db, 60_000);
    // Another transaction holds the projection table, so the directory's read waits while skill.updated is consumed.
    const lock = await holdTableLock(db, 'skills');
    const read = directory.byName('repriced');
    await new Promise((resolve) => setImmediate(resolve));
    directory.invalidate();
    await lock.release();
    expect((await read)?.endpoints[0]?.price).toBe('0.05');
    // The new revision is in the projection: a cached answer would still sell the call at the old price.
    const after = { ...before, revision: before.revision + 1 };
    after.endpoints = before.endpoints.map((endpoint) => ({ ...endpoint, price: '0.50' }));
    await db.transaction().execute((trx) => applySkillUpdated(trx, after));
    expect((await directory.byName('repriced'))?.endpoints[0]?.price).toBe('0.50');
  });
});
