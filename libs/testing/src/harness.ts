/**
 * The one way a suite starts a service on real Postgres, NATS and (when it needs one) anvil: its own test
 * environment (a cloned database, its own JetStream namespace), one TestClock handed to the service, and one stop
 * that undoes everything in reverse: what the suite added with `onStop`, the service, then the environment.
 * Each service's helpers wrap it with that service's start function and settings (services/registry/test/helpers.ts).
 */
import type { StartedService } from '@paygate/runtime';
import { TestClock } from './clock';
import { createTestEnvironment, type TestEnvironment } from './infra';

export interface ServiceHarness<S extends StartedService> {
  env: TestEnvironment;
  service: S;
  url: string;
  clock: TestClock;
  /**
   * Something to stop with the harness: a stand-in server or an RPC responder before the service (the default), or
   * what the service reads from, such as its chain, after it (`'after'`).
   */
  onStop(stop: () => unknown, when?: 'before' | 'after'): void;
  /**
   * Stops what `onStop` registered before the service (last first), the service, what was registered after it (last
   * first), then the environment the harness created.
   */
  stop(): Promise<void>;
}

interface HarnessOptions {
  /** A suite's own environment, shared by several services; the harness then leaves its cleanup to the suite. */
  env?: TestEnvironment;
  /** Server settings of the environment the harness creates (createTestEnvironment's `databaseSettings`). */
  databaseSettings?: Record<string, string>;
  /** Default: a clock that stands still at the current time. */
  clock?: TestClock;
}

/** What a start function gets: the environment, the clock, and onStop for what it starts beside the service. */
export interface HarnessSetup {
  env: TestEnvironment;
  clock: TestClock;
  onStop: ServiceHarness<StartedService>['onStop'];
}

/**
 * Creates the environment (unless given), starts the service with it and the clock, and returns the harness. A start
 * that fails stops what it registered and cleans the environment it created before the error is rethrown, so a
 * failed beforeAll leaks nothing.
 */
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
    for (const stop of [...stops.before, ...stops.after].reverse()) {
      try {
        await stop();
      } catch {
        // The start's own error is the one to report.
      }
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
