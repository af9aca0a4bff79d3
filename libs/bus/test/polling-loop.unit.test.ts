import { createLogger } from '@paygate/telemetry';
import { PollingLoop } from '../src/polling-loop';

const logger = createLogger('polling-loop-test', 'silent');
/** Inside a pass: a wait on the (fake) clock. */
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** The test's time passing: fake timers advanced, promises settled along the way. */
const elapse = (ms: number) => jest.advanceTimersByTimeAsync(ms);
/** stop() waits for the running pass, whose own waits need the clock to move. */
async function stopWhileElapsing(loop: PollingLoop, ms: number): Promise<void> {
  const stopped = loop.stop();
  await elapse(ms);
  await stopped;
}

// Fake timers: every duration below is exact, so the timing rules are checked to the millisecond and no test
// depends on how busy the machine is.
beforeEach(() => jest.useFakeTimers());
afterEach(() => {
  jest.clearAllTimers();
  jest.useRealTimers();
});

describe('PollingLoop', () => {
  it('runs a pass at start, then every interval, and never two passes at once', async () => {
    let active = 0;
    let maxActive = 0;
    let passes = 0;
    const loop = new PollingLoop(
      async () => {
        active++;
        maxActive = Math.max(maxActive, active);
        await sleep(15);
        passes++;
        active--;
      },
      { what: 'test', logger, intervalMs: 10 },
    );
    loop.start();
    for (let i = 0; i < 20; i++) {
      loop.kick();
      await elapse(3);
    }
    await stopWhileElapsing(loop, 15);
    expect(passes).toBeGreaterThan(1);
    expect(maxActive).toBe(1);
  });

  it('a kick during a pass runs one more pass right after it; a kick when idle runs one now', async () => {
    const starts: number[] = [];
    let release: (() => void) | undefined;
    const loop = new PollingLoop(
      async () => {
        starts.push(Date.now());
        if (starts.length === 1) await new Promise<void>((resolve) => (release = resolve));
      },
      { what: 'test', logger, intervalMs: 60_000 },
    );
    loop.start();
    await elapse(20);
    expect(starts).toHaveLength(1);
    loop.kick();
    loop.kick();
    release?.();
    await elapse(30);
    expect(starts).toHaveLength(2); // the two kicks during the pass asked for one more pass, not two
    loop.kick();
    await elapse(30);
    expect(starts).toHaveLength(3);
    await loop.stop();
  });

  it('runSoon resolves after a pass that started after it, not after the pass already running', async () => {
    const seen: number[] = [];
    let release: (() => void) | undefined;
    let work = 0;
    const loop = new PollingLoop(
      async () => {
        const snapshot = work;
        if (seen.length === 1) await new Promise<void>((resolve) => (release = resolve));
        seen.push(snapshot);
      },
      { what: 'test', logger, intervalMs: 60_000 },
    );
    loop.start();
    await elapse(5);
    expect(seen).toEqual([0]);
    loop.kick();
    await elapse(5); // the second pass is running (held) and read work = 0
    work = 1;
    let resolved = false;
    const done = loop.runSoon().then(() => (resolved = true));
    release?.();
    await elapse(5);
    await done;
    expect(resolved).toBe(true);
    // The held pass read 0; runSoon waited for the third, which saw the work written before it was called.
    expect(seen).toEqual([0, 0, 1]);
    await loop.stop();
    // A stopped loop runs nothing: runSoon does not wait for it.
    await expect(loop.runSoon()).resolves.toBeUndefined();
  });

  it('runs again at once when a pass says more work is waiting, and honours a delay it asks for', async () => {
    let passes = 0;
    const loop = new PollingLoop(async () => (++passes < 5 ? true : { delayMs: 60_000 }), {
      what: 'test',
      logger,
      intervalMs: 60_000,
    });
    loop.start();
    await elapse(80);
    expect(passes).toBe(5);
    await elapse(59_000);
    expect(passes).toBe(5);
    await elapse(1_000);
    expect(passes).toBe(6);
    await loop.stop();
  });

  it('backs off on consecutive failures, reports them, and reports the recovery', async () => {
    const times: number[] = [];
    const failures: number[] = [];
    let recovered = 0;
    const loop = new PollingLoop(
      async () => {
        times.push(Date.now());
        if (times.length <= 3) throw new Error('rpc down');
      },
      {
        what: 'test',
        logger,
        intervalMs: 20,
        maxBackoffMs: 100,
        onFailure: (_error, count) => failures.push(count),
        onRecovered: (count) => {
          recovered = count;
        },
      },
    );
    loop.start();
    await elapse(450);
    await loop.stop();
    expect(failures).toEqual([1, 2, 3]);
    expect(recovered).toBe(3);
    // 40, 80, then 100 (capped) ms after the failed passes; the interval again after the recovery.
    expect(times.slice(1, 6).map((t, i) => t - times[i]!)).toEqual([40, 80, 100, 20, 20]);
  });

  it('without a backoff bound a failure waits the interval, and the loop keeps going', async () => {
    let passes = 0;
    const loop = new PollingLoop(
      async () => {
        passes++;
        throw new Error('boom');
      },
      { what: 'test', logger, intervalMs: 10 },
    );
    loop.start();
    await elapse(95);
    await loop.stop();
    expect(passes).toBe(10); // at 0, 10, … 90 ms
  });

  it('stop waits for the running pass (at most stopWaitMs) and nothing runs after it', async () => {
    let finished = false;
    let passes = 0;
    const loop = new PollingLoop(
      async () => {
        passes++;
        await sleep(50);
        finished = true;
      },
      { what: 'test', logger, intervalMs: 5 },
    );
    loop.start();
    await elapse(10);
    await stopWhileElapsing(loop, 50);
    expect(finished).toBe(true);
    const after = passes;
    loop.kick();
    await elapse(30);
    expect(passes).toBe(after);

    const slow = new PollingLoop(() => sleep(800).then(() => undefined), {
      what: 'test',
      logger,
      intervalMs: 5,
      stopWaitMs: 50,
    });
    slow.start();
    await elapse(10);
    const started = Date.now();
    await stopWhileElapsing(slow, 50);
    expect(Date.now() - started).toBe(50);
  });

  it('does not start before start() and can wait firstDelayMs before the first pass', async () => {
    let passes = 0;
    const loop = new PollingLoop(
      async () => {
        passes++;
      },
      { what: 'test', logger, intervalMs: 60_000, firstDelayMs: 40 },
    );
    loop.kick();
    await elapse(10);
    expect(passes).toBe(0);
    loop.start();
    await elapse(39);
    expect(passes).toBe(0);
    await elapse(1);
    expect(passes).toBe(1);
    await loop.stop();
  });
});
