import { createLogger } from '@paygate/telemetry';
import { PollingLoop } from '../src/polling-loop';

const logger = createLogger('polling-loop-test', 'silent');
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

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
      await sleep(3);
    }
    await loop.stop();
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
    await sleep(20);
    expect(starts).toHaveLength(1);
    loop.kick();
    loop.kick();
    release?.();
    await sleep(30);
    expect(starts).toHaveLength(2); // the two kicks during the pass asked for one more pass, not two
    loop.kick();
    await sleep(30);
    expect(starts).toHaveLength(3);
    await loop.stop();
  });

  it('runs again at once when a pass says more work is waiting, and honours a delay it asks for', async () => {
    let passes = 0;
    const loop = new PollingLoop(async () => (++passes < 5 ? true : { delayMs: 60_000 }), {
      what: 'test',
      logger,
      intervalMs: 60_000,
    });
    loop.start();
    await sleep(80);
    await loop.stop();
    expect(passes).toBe(5);
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
    await sleep(450);
    await loop.stop();
    expect(failures).toEqual([1, 2, 3]);
    expect(recovered).toBe(3);
    // 40, 80, 100 (capped) ms between the failed passes; the first gap is at least the doubled interval.
    expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(35);
    expect(times[3]! - times[2]!).toBeGreaterThanOrEqual(95);
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
    await sleep(100);
    await loop.stop();
    expect(passes).toBeGreaterThan(3);
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
    await sleep(10);
    await loop.stop();
    expect(finished).toBe(true);
    const after = passes;
    loop.kick();
    await sleep(30);
    expect(passes).toBe(after);

    const slow = new PollingLoop(() => sleep(800).then(() => undefined), {
      what: 'test',
      logger,
      intervalMs: 5,
      stopWaitMs: 50,
    });
    slow.start();
    await sleep(10);
    const started = Date.now();
    await slow.stop();
    expect(Date.now() - started).toBeLessThan(500);
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
    await sleep(10);
    expect(passes).toBe(0);
    loop.start();
    await sleep(15);
    expect(passes).toBe(0);
    await sleep(60);
    expect(passes).toBe(1);
    await loop.stop();
  });
});
