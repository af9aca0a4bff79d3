import { createLogger } from '@paygate/telemetry';
import { StartupError } from '../src/errors';
import { retryStartup } from '../src/retry';

// Fake timers: the backoff schedule is checked to the millisecond, without waiting for it.
beforeEach(() => jest.useFakeTimers());
afterEach(() => {
  jest.clearAllTimers();
  jest.useRealTimers();
});

describe('retryStartup', () => {
  it('waits 500 ms, then doubles up to 5 s between attempts, logging one line per failure, then gives up', async () => {
    const logger = createLogger('retry-test', 'silent');
    const warnings: string[] = [];
    jest.spyOn(logger, 'warn').mockImplementation(((line: string) => warnings.push(line)) as never);
    const attemptsAt: number[] = [];
    const started = Date.now();
    const outcome = retryStartup(
      async () => {
        attemptsAt.push(Date.now() - started);
        throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1\n    at somewhere'), {
          code: 'ECONNREFUSED',
        });
      },
      { what: 'Postgres', attempts: 7, logger },
    ).catch((error: unknown) => error);
    await jest.advanceTimersByTimeAsync(60_000);
    const error = await outcome;
    expect(attemptsAt).toEqual([0, 500, 1500, 3500, 7500, 12_500, 17_500]);
    expect(error).toBeInstanceOf(StartupError);
    expect((error as Error).message).toBe(
      'cannot reach Postgres (ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:1); gave up after 7 attempts',
    );
    expect(warnings).toEqual(
      [500, 1000, 2000, 4000, 5000, 5000].map(
        (delay, i) =>
          `cannot reach Postgres (ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:1); retrying in ${delay} ms (attempt ${i + 1}/7)`,
      ),
    );
  });

  it('returns the first success without waiting further, honouring the configured delays', async () => {
    const logger = createLogger('retry-test', 'silent');
    const attemptsAt: number[] = [];
    const started = Date.now();
    const outcome = retryStartup(
      async () => {
        attemptsAt.push(Date.now() - started);
        if (attemptsAt.length < 3) throw new Error('not yet');
        return 'connected';
      },
      { what: 'NATS', attempts: 5, initialDelayMs: 100, maxDelayMs: 150, logger },
    );
    await jest.advanceTimersByTimeAsync(1_000);
    await expect(outcome).resolves.toBe('connected');
    expect(attemptsAt).toEqual([0, 100, 250]);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('throws a failure it is told not to retry at once, as it is, and retries the others', async () => {
    const logger = createLogger('retry-test', 'silent');
    const refusal = Object.assign(new Error('permission denied'), { code: 'PERMISSION' });
    let calls = 0;
    const refused = await retryStartup(
      async () => {
        calls++;
        throw refusal;
      },
      {
        what: 'JetStream',
        attempts: 5,
        logger,
        retryable: (error) => (error as { code?: string }).code === 'TIMEOUT',
      },
    ).catch((error: unknown) => error);
    expect(refused).toBe(refusal);
    expect(calls).toBe(1);

    calls = 0;
    const outcome = retryStartup(
      async () => {
        calls++;
        if (calls < 3) throw Object.assign(new Error('timed out'), { code: 'TIMEOUT' });
        return 'started';
      },
      {
        what: 'JetStream',
        attempts: 5,
        logger,
        retryable: (error) => (error as { code?: string }).code === 'TIMEOUT',
      },
    );
    await jest.advanceTimersByTimeAsync(10_000);
    expect(await outcome).toBe('started');
    expect(calls).toBe(3);
  });
});
