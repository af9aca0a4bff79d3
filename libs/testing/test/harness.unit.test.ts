import { TestClock } from '../src/clock';
import { startServiceHarness } from '../src/harness';
import type { TestEnvironment } from '../src/infra';

// A suite's own environment (the harness leaves its cleanup to the suite), so no Postgres or NATS is reached.
const env = { id: 'unit' } as TestEnvironment;

describe('startServiceHarness', () => {
  it('hands the service the clock and stops in reverse: before-hooks, the service, after-hooks, once', async () => {
    const order: string[] = [];
    const clock = new TestClock('2026-01-01T00:00:00Z');
    const h = await startServiceHarness(
      'unit',
      async (setup) => {
        expect(setup.env).toBe(env);
        expect(setup.clock).toBe(clock);
        setup.onStop(() => order.push('chain'), 'after');
        setup.onStop(() => order.push('stand-in'));
        return { url: 'http://127.0.0.1:1', stop: async () => void order.push('service') };
      },
      { env, clock },
    );
    h.onStop(() => order.push('db handle'));
    expect(h.url).toBe('http://127.0.0.1:1');
    await Promise.all([h.stop(), h.stop()]);
    await h.stop();
    expect(order).toEqual(['db handle', 'stand-in', 'service', 'chain']);
  });

  it('stops what a failed start registered and rethrows its error', async () => {
    const order: string[] = [];
    await expect(
      startServiceHarness(
        'unit',
        async ({ onStop }) => {
          onStop(() => order.push('receiver'), 'after');
          onStop(() => {
            throw new Error('a stop that fails does not hide the start error');
          });
          throw new Error('port in use');
        },
        { env },
      ),
    ).rejects.toThrow('port in use');
    expect(order).toEqual(['receiver']);
  });

  it('gives a still clock by default', async () => {
    const h = await startServiceHarness('unit', async () => ({ url: '', stop: async () => undefined }), {
      env,
    });
    expect(h.clock.ticking).toBe(false);
  });
});
