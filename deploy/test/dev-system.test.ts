/**
 * Two `make dev` systems beside each other. Each run drops its schemas and event streams at start, so a second
 * system with only DEV_PORT_OFFSET set must not land on the first one's names (its services would go on writing
 * into the second's fresh tables, against another chain): each offset has its own schemas and streams, and a run
 * on names another running system holds refuses to start, saying which names, who holds them and how to choose
 * others. Against the real Postgres, through the runner's own functions and its infrastructure step.
 *
 *   npx jest deploy/test/dev-system
 */
import { randomSuffix, TEST_DATABASE_URL, TEST_NATS_URL } from '@paygate/testing';
import { ensureInfrastructure } from '../dev/infrastructure';
import { DevSystemInUseError, devSystem, lockDevSystem } from '../dev/system';

describe('the names of a make dev system', () => {
  it('offset 0 keeps dev_* and dev; offset 1000 gets dev1000_* and dev1000', () => {
    expect(devSystem({})).toEqual({ portOffset: 0, namespace: 'dev', schemaPrefix: 'dev_' });
    expect(devSystem({ DEV_PORT_OFFSET: '0' })).toEqual(devSystem({}));
    expect(devSystem({ DEV_PORT_OFFSET: '1000' })).toEqual({
      portOffset: 1000,
      namespace: 'dev1000',
      schemaPrefix: 'dev1000_',
    });
  });

  it('DEV_SCHEMA_PREFIX and DEV_NAMESPACE, when set, win over the offset', () => {
    expect(devSystem({ DEV_PORT_OFFSET: '1000', DEV_SCHEMA_PREFIX: 'mine_', DEV_NAMESPACE: 'mine' })).toEqual(
      { portOffset: 1000, namespace: 'mine', schemaPrefix: 'mine_' },
    );
  });

  it.each([
    [{ DEV_PORT_OFFSET: 'abc' }, /^DEV_PORT_OFFSET must be a whole number from 0 to 55000/],
    [{ DEV_PORT_OFFSET: '-1000' }, /^DEV_PORT_OFFSET must be a whole number/],
    [{ DEV_PORT_OFFSET: '70000' }, /^DEV_PORT_OFFSET must be a whole number/],
    [{ DEV_SCHEMA_PREFIX: 'Dev-"x' }, /^DEV_SCHEMA_PREFIX must be .*got "Dev-"x"/],
    [{ DEV_NAMESPACE: 'Dev Two' }, /^DEV_NAMESPACE must be .*got "Dev Two"/],
  ])('refuses %p, naming the variable and the rule', (env, message) => {
    expect(() => devSystem(env)).toThrow(message);
  });
});

describe('a running system holds its names', () => {
  const id = randomSuffix(4);
  const first = { schemaPrefix: `devsys${id}_`, namespace: `devsys${id}` };

  it('a second system on the same prefix refuses, naming the prefix, the holder and how to choose another', async () => {
    const held = await lockDevSystem(TEST_DATABASE_URL, first, { holder: 'make dev (edge :8080)' });
    try {
      const second = lockDevSystem(TEST_DATABASE_URL, first, { holder: 'make dev (edge :9080)' });
      await expect(second).rejects.toThrow(DevSystemInUseError);
      await expect(second).rejects.toThrow(
        new RegExp(
          `^another make dev is running on the schemas ${first.schemaPrefix}\\* in this Postgres ` +
            `\\(held by "make dev \\(edge :8080\\)", Postgres pid \\d+\\).*another DEV_PORT_OFFSET.*dev1000_\\*.*DEV_SCHEMA_PREFIX`,
        ),
      );
      // Only the event namespace shared: refused too (its streams are dropped at start as well).
      await expect(
        lockDevSystem(TEST_DATABASE_URL, { ...first, schemaPrefix: `devsys${id}b_` }, { holder: 'make dev' }),
      ).rejects.toThrow(`another make dev is running on the event namespace ${first.namespace}`);
      // Other names (what another offset derives) run beside it.
      const beside = await lockDevSystem(
        TEST_DATABASE_URL,
        { schemaPrefix: `devsys${id}1000_`, namespace: `devsys${id}1000` },
        { holder: 'make dev (edge :9080)' },
      );
      await beside.release();
    } finally {
      await held.release();
    }
    // Once the first system stops, its names are free again.
    const again = await lockDevSystem(TEST_DATABASE_URL, first, { holder: 'make dev' });
    await again.release();
  });

  it("the runner's infrastructure step takes the names before anything is dropped, and refuses a second run", async () => {
    const saved = { DATABASE_URL: process.env.DATABASE_URL, NATS_URL: process.env.NATS_URL };
    process.env.DATABASE_URL = TEST_DATABASE_URL;
    process.env.NATS_URL = TEST_NATS_URL;
    const system = { schemaPrefix: `devinf${id}_`, namespace: `devinf${id}` };
    const quiet = () => undefined;
    try {
      const running = await ensureInfrastructure(quiet, { system });
      try {
        await expect(ensureInfrastructure(quiet, { system })).rejects.toThrow(
          `another make dev is running on the schemas ${system.schemaPrefix}*`,
        );
      } finally {
        await running.stop();
      }
      // Stopped: the names are free, and a new run takes them.
      const next = await ensureInfrastructure(quiet, { system });
      await next.stop();
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });
});
