/** The one way a suite starts a service on real Postgres and NATS (see the README). */
import type { StartedService } from '@paygate/runtime';
import { TestClock } from './clock';
import { createTestEnvironment, type TestEnvironment } from './infra';

export interface ServiceHarness<S extends StartedService> {
  env: TestEnvironment;
  service: S;
  url: string;
  clock: TestClock;
  /** Something to stop before the service (a stand-in), or after it (`'after'`: what it reads from, its chain). */
  onStop(stop: () => unknown, when?: 'before' | 'after'): void;
  /** Stops the before-hooks (last first), the service, the after-hooks, then the environment it created. */
  stop(): Promise<void>;
}

interface HarnessOptions {
  /** A suite's own environment, shared by several services; its cleanup is the suite's. */
  env?: TestEnvironment;
  databaseSettings?: Record<string, string>;
  /** Default: a clock that stands still at the current time. */
  clock?: TestClock;
}

/** What a start function gets: the environment, the clock, and onStop for what it starts beside the service. */
export type HarnessSetup = Pick<ServiceHarness<StartedService>, 'env' | 'clock' | 'onStop'>;

/** A start that fails stops what it registered and cleans the environment before rethrowing: nothing leaks. */
export async function startServiceHarness<S extends StartedService>(
  label: string,
  start: (setup: HarnessSetup) => Promise<S>,
  options: HarnessOptions = {},
): Promise<ServiceHarness<S>> {
  const env =
    options.env ?? (await createTestEnvironment(label, { databaseSettings: options.databaseSettings }));
  const ownsEnv = options.env === undefined;
  const clock = options.clock ?? new TestClock();
  const stops = { before: [] as Array<() => unknown>, after: [] as Array<() => unknown> };
  const onStop = (stop: () => unknown, when: 'before' | 'after' = 'before') => {
    stops[when].push(stop);
  };
  let service: S;
  try {
    service = await start({ env, clock, onStop });
  } catch (error) {
    // The start's own error is the one to report.
    for (const stop of [...stops.before, ...stops.after].reverse()) {
      await Promise.resolve()
        .then(stop)
        .catch(() => undefined);
    }
    if (ownsEnv) await env.cleanup().catch(() => undefined);
    throw error;
  }
  let stopped: Promise<void> | undefined;
  return {
    env,
    service,
    url: service.url,
    clock,
    onStop,
    stop: () => {
      // Twice is once: an afterAll and a test's own stop may both call it.
      stopped ??= (async () => {
        for (const stop of stops.before.reverse()) await stop();
        await service.stop();
        for (const stop of stops.after.reverse()) await stop();
        if (ownsEnv) await env.cleanup();
      })();
      return stopped;
    },
  };
}
