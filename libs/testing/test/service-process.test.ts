/**
 * startServiceProcess, which the benchmarks use to run a service as deployed: ready once its /readyz answers on
 * real Postgres and NATS, and a service that cannot start fails at once with what it printed, not after a timeout.
 */
import { createTestEnvironment, findFreePort, startServiceProcess, type TestEnvironment } from '../src';

describe('startServiceProcess', () => {
  let env: TestEnvironment;
  beforeAll(async () => {
    env = await createTestEnvironment('svcproc');
  });
  afterAll(async () => {
    await env.cleanup();
  });

  it('answers once the service is ready, and the service stops on SIGTERM', async () => {
    const notifier = await startServiceProcess('notifier', await findFreePort(), env.envFor('notifier'));
    expect(await notifier.kill('SIGTERM')).toBe(0);
  });

  it('fails with the service output when the service exits before it is ready', async () => {
    const started = Date.now();
    await expect(
      startServiceProcess('notifier', await findFreePort(), {
        ...env.envFor('notifier'),
        DATABASE_URL: 'not a url',
      }),
    ).rejects.toThrow(/notifier exited with 1 before it was ready[\s\S]*DATABASE_URL/);
    // Well inside the 60 s readiness bound: the exit was noticed, not waited out.
    expect(Date.now() - started).toBeLessThan(30_000);
  });
});
