import {
  createTestEnvironment,
  dropRetiredSuiteDatabases,
  startServiceHarness,
  TEST_DATABASE_URL,
} from '@paygate/testing';
import pg from 'pg';

async function databaseNamed(name: string): Promise<{ datallowconn: boolean } | undefined> {
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await client.connect();
  try {
    const found = await client.query<{ datallowconn: boolean }>(
      'select datallowconn from pg_database where datname = $1',
      [name],
    );
    return found.rows[0];
  } finally {
    await client.end();
  }
}

describe('suite databases: closed when a suite ends, dropped together after the run', () => {
  it('cleanup ends the connections and refuses new ones; the drop after the run spares a live suite', async () => {
    const finished = await createTestEnvironment('retire');
    const live = await createTestEnvironment('live');
    const finishedName = new URL(finished.databaseUrl).pathname.slice(1);
    const liveName = new URL(live.databaseUrl).pathname.slice(1);
    try {
      const open = new pg.Client({ connectionString: finished.databaseUrl });
      open.on('error', () => undefined);
      await open.connect();
      const ended = new Promise<void>((resolve) => open.once('end', resolve));

      await finished.cleanup();
      await ended;
      const refused = new pg.Client({ connectionString: finished.databaseUrl });
      await expect(refused.connect()).rejects.toThrow(/not currently accepting connections/);
      expect(await databaseNamed(finishedName)).toEqual({ datallowconn: false });

      // Named, so that only this test's databases go (the run's other retired ones are dropped after it).
      expect(await dropRetiredSuiteDatabases(TEST_DATABASE_URL, { names: [finishedName, liveName] })).toBe(1);
      expect(await databaseNamed(finishedName)).toBeUndefined();
      expect(await databaseNamed(liveName)).toEqual({ datallowconn: true });
    } finally {
      await live.cleanup();
    }
  });

  /** A setting every new connection to the environment's database gets (synchronous_commit by default). */
  async function commitSetting(
    env: Awaited<ReturnType<typeof createTestEnvironment>>,
    name = 'synchronous_commit',
  ): Promise<string> {
    const client = new pg.Client({ connectionString: env.databaseUrl });
    await client.connect();
    try {
      const { rows } = await client.query<Record<string, string>>(`show ${name}`);
      return rows[0]![name]!;
    } finally {
      await client.end();
    }
  }

  it('commits on a suite database do not wait for the disk', async () => {
    const env = await createTestEnvironment('settings');
    try {
      expect(await commitSetting(env)).toBe('off');
    } finally {
      await env.cleanup();
    }
  });

  it("a harness's databaseSettings reach the environment it creates", async () => {
    const h = await startServiceHarness(
      'harnesssettings',
      async () => ({ url: 'http://127.0.0.1:1', stop: async () => undefined }),
      { databaseSettings: { deadlock_timeout: '5s' } },
    );
    try {
      expect(await commitSetting(h.env, 'deadlock_timeout')).toBe('5s');
    } finally {
      await h.stop();
    }
  });

  it("a benchmark's database (no jest worker) keeps durable commits", async () => {
    const worker = process.env.JEST_WORKER_ID;
    delete process.env.JEST_WORKER_ID;
    let env: Awaited<ReturnType<typeof createTestEnvironment>>;
    try {
      env = await createTestEnvironment('durable');
    } finally {
      process.env.JEST_WORKER_ID = worker;
    }
    try {
      expect(await commitSetting(env)).toBe('on');
    } finally {
      await env.cleanup();
    }
  });
});
