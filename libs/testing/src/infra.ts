import { randomBytes } from 'node:crypto';
import { type Bus, connectBus, deleteStreams, ensureStreams } from '@paygate/bus';
import type { EventEnvelope } from '@paygate/contracts';
import { createDatabase, retryStartup } from '@paygate/runtime';
import { createLogger, type Logger } from '@paygate/telemetry';
import type { Kysely } from 'kysely';
import type { Subscription } from 'nats';
import pg from 'pg';
import {
  databaseUrlFor,
  retireSuiteDatabase,
  SUITE_DATABASE_PREFIX,
  serviceSchemaName,
  TEMPLATE_DATABASE_ENV,
} from './template-database';

export const TEST_DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const TEST_NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

export function randomSuffix(bytes = 4): string {
  return randomBytes(bytes).toString('hex');
}

/**
 * Everything one test suite needs to stay apart from every other: its own event namespace (so its own
 * streams) and its own Postgres database, cloned from the migrated template when there is one. `cleanup` deletes
 * the streams and closes the database (with-infra drops it after the run).
 */
export interface TestEnvironment {
  id: string;
  namespace: string;
  databaseUrl: string;
  natsUrl: string;
  logger: Logger;
  schemaFor(service: string): string;
  /** Environment variables for a service under test, over the given extras. */
  envFor(service: string, extra?: Record<string, string>): NodeJS.ProcessEnv;
  bus(): Promise<Bus>;
  cleanup(): Promise<void>;
}

/**
 * Which suite database holds each schema that `schemaFor` handed out, so `openSchema(schema)` opens the right one.
 * Module state is per suite: jest gives each test file its own module registry.
 */
const suiteDatabasesBySchema = new Map<string, Set<string>>();

/** Runs `run` on a connection to the shared test database, waiting out a brief shortage of connection slots. */
async function onAdminConnection(
  run: (client: pg.Client) => Promise<unknown>,
  logger: Logger,
): Promise<void> {
  const client = await retryStartup(
    async () => {
      const candidate = new pg.Client({
        connectionString: TEST_DATABASE_URL,
        connectionTimeoutMillis: 10_000,
      });
      candidate.on('error', () => undefined);
      await candidate.connect().catch(async (error) => {
        await candidate.end().catch(() => undefined);
        throw error;
      });
      return candidate;
    },
    { what: 'the test Postgres', attempts: 8, logger },
  );
  try {
    await run(client);
  } finally {
    await client.end();
  }
}

/**
 * Creates the suite's database (from the migrated template when there is one) with `settings` as every connection's
 * defaults. Under jest, commits return before their WAL reaches the disk: a test never crashes the shared Postgres,
 * and waiting for fsync on every commit only slowed the suites. Benchmarks (tsx, no jest) keep production's durable
 * commits, so their figures include the fsync a real commit waits for.
 */
function createSuiteDatabase(database: string, settings: Record<string, string>, logger: Logger) {
  const template = process.env[TEMPLATE_DATABASE_ENV];
  const durability = process.env.JEST_WORKER_ID === undefined ? {} : { synchronous_commit: 'off' };
  return onAdminConnection(async (client) => {
    await client.query(`create database "${database}"${template ? ` template "${template}"` : ''}`);
    for (const [name, value] of Object.entries({ ...durability, ...settings })) {
      await client.query(
        `alter database "${database}" set ${client.escapeIdentifier(name)} = ${client.escapeLiteral(value)}`,
      );
    }
  }, logger);
}

/** What every service of a suite is started with besides its database, schema and namespace. */
function suiteServiceSettings(): Record<string, string> {
  return {
    PORT: '0',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    // About 20 s of patience (0.5, 1, 2, 4, 5, 5, 5 s): a shared Postgres briefly out of connection slots
    // (53300 too many clients, while other suites start their services) is waited out, not a failed suite.
    STARTUP_ATTEMPTS: '8',
    // Three jest workers each run up to seven services against one shared Postgres (max_connections 100):
    // the production default of 10 per service could use it up (with four workers a clean-clone run peaked at 75).
    DB_POOL_SIZE: '4',
    // An idle connection goes back to Postgres after 5 s (30 s in production): with 30 s a clean-clone run peaked at
    // 93 of the 100 connections, mostly idle ones of suites that had finished their burst. After 1 s, pools opened
    // a third more sessions, and a new session costs Postgres about 47 ms of CPU on this host (pgbench -C), a
    // hundred times a query on an open one.
    DB_IDLE_TIMEOUT_MS: '5000',
    // A request waits up to 15 s (5 s in production) for a pooled connection: at load 20 on two cores a burst of
    // requests against a pool of 4 can wait longer than 5 s, which would be a 503 "database unavailable".
    DB_CONNECT_TIMEOUT_MS: '15000',
  };
}

/**
 * `databaseSettings`: server settings every connection to the suite's database starts with (ALTER DATABASE ... SET),
 * for a suite that needs one in the services' own pools, which a test cannot reconfigure (deadlock_timeout).
 */
export async function createTestEnvironment(
  label = 't',
  options: { databaseSettings?: Record<string, string> } = {},
): Promise<TestEnvironment> {
  const id = `${label.replace(/[^a-z0-9]/g, '').slice(0, 12)}_${randomSuffix()}`;
  const namespace = `t${id}`;
  const database = `${SUITE_DATABASE_PREFIX}${id}`;
  const logger = createLogger(`test-${label}`, process.env.TEST_LOG_LEVEL ?? 'silent');
  await createSuiteDatabase(database, options.databaseSettings ?? {}, logger);
  const databaseUrl = databaseUrlFor(TEST_DATABASE_URL, database);
  const schemas = new Set<string>();
  const buses: Bus[] = [];
  const env: TestEnvironment = {
    id,
    namespace,
    databaseUrl,
    natsUrl: TEST_NATS_URL,
    logger,
    schemaFor(service) {
      const schema = serviceSchemaName(service);
      schemas.add(schema);
      const databases = suiteDatabasesBySchema.get(schema) ?? new Set<string>();
      databases.add(databaseUrl);
      suiteDatabasesBySchema.set(schema, databases);
      return schema;
    },
    envFor(service, extra = {}) {
      return {
        DATABASE_URL: databaseUrl,
        NATS_URL: TEST_NATS_URL,
        DB_SCHEMA: env.schemaFor(service),
        EVENT_NAMESPACE: namespace,
        ...suiteServiceSettings(),
        ...extra,
      };
    },
    async bus() {
      const bus = await connectBus({ url: TEST_NATS_URL, namespace, name: `test-${id}` });
      await ensureStreams(bus);
      buses.push(bus);
      return bus;
    },
    async cleanup() {
      const admin = await connectBus({ url: TEST_NATS_URL, namespace, name: `cleanup-${id}` });
      await deleteStreams(admin);
      await admin.close();
      for (const bus of buses) await bus.close();
      for (const schema of schemas) suiteDatabasesBySchema.get(schema)?.delete(databaseUrl);
      await onAdminConnection((client) => retireSuiteDatabase(client, database), logger);
    },
  };
  return env;
}

/**
 * A database handle into one schema, for assertions on what a service stored: in the suite database of the test
 * environment that handed the schema out, or in the shared test database for a schema of no environment. `DB` is
 * that service's `Database` (`unknown` for a handle that runs only raw `sql`).
 */
export function openSchema<DB>(schema: string): Kysely<DB> {
  const databases = [...(suiteDatabasesBySchema.get(schema) ?? [])];
  if (databases.length > 1) {
    throw new Error(`schema ${schema} is in ${databases.length} live test environments: clean one up first`);
  }
  return createDatabase<DB>({ url: databases[0] ?? TEST_DATABASE_URL, schema, idleTimeoutMs: 5000 });
}

/**
 * How long `waitFor` polls by default. A wait ends as soon as its condition holds, so this only bounds a
 * failure; it is generous because CI's two cores run two suites with real Postgres, NATS and anvil at once.
 */
const WAIT_FOR_DEFAULT_MS = 20_000;

/**
 * Polls `probe` until it returns a truthy value, or fails after `timeoutMs` with `message`: a string, or a function
 * asked only then, to describe the state that never came (a row's status and last error, say).
 */
export async function waitFor<T>(
  probe: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  options: { timeoutMs?: number; intervalMs?: number; message?: string | (() => Promise<string>) } = {},
): Promise<T> {
  const timeoutMs = options.timeoutMs ?? WAIT_FOR_DEFAULT_MS;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value) return value as T;
    } catch (error) {
      lastError = error;
    }
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 50));
  }
  const message =
    typeof options.message === 'function'
      ? await options
          .message()
          .catch((error: Error) => `condition not met (and not described: ${error.message})`)
      : options.message;
  throw new Error(
    `${message ?? 'condition not met'} within ${timeoutMs} ms${lastError ? `: ${(lastError as Error).message}` : ''}`,
  );
}

/**
 * Records every event published on a subject (a core NATS subscription sees JetStream publishes too),
 * so a test can assert what went out and how many times.
 */
export class EventRecorder {
  readonly events: EventEnvelope[] = [];
  private readonly subscription: Subscription;

  constructor(bus: Bus, eventType: string) {
    const decoder = new TextDecoder();
    this.subscription = bus.nc.subscribe(bus.subjectFor(eventType), {
      // A core subscription sees each publish, and the outbox relay publishes again (same event id, deduplicated by
      // JetStream) when an ack came late: record each event once, as a stream consumer would see it.
      callback: (_err, message) => {
        const event = JSON.parse(decoder.decode(message.data)) as EventEnvelope;
        if (!this.events.some((seen) => seen.id === event.id)) this.events.push(event);
      },
    });
  }

  async waitForCount(count: number, timeoutMs = 10_000): Promise<EventEnvelope[]> {
    await waitFor(() => this.events.length >= count, {
      timeoutMs,
      message: `expected ${count} events, saw ${this.events.length}`,
    });
    return this.events;
  }

  /**
   * Waits for the first recorded event whose data matches. Prefer it to a count: the recorder also hears events that
   * earlier steps published late (the outbox relay polls) and other tests' events of the same type.
   */
  waitForEvent(
    matches: (data: Record<string, unknown>) => boolean,
    options: { timeoutMs?: number; description?: string } = {},
  ): Promise<EventEnvelope> {
    return waitFor(() => this.events.find((event) => matches(event.data as Record<string, unknown>)), {
      timeoutMs: options.timeoutMs,
      message: async () =>
        `no ${options.description ?? 'matching event'} among the ${this.events.length} recorded`,
    });
  }

  stop(): void {
    this.subscription.unsubscribe();
  }
}

/** Counts the messages a JetStream stream holds on one subject: the ground truth for exactly-once tests. */
export async function countStreamMessages(bus: Bus, eventType: string): Promise<EventEnvelope[]> {
  const decoder = new TextDecoder();
  const info = await bus.jsm.streams.info(bus.eventsStream, {
    subjects_filter: bus.subjectFor(eventType),
  });
  const result: EventEnvelope[] = [];
  for (let seq = info.state.first_seq; seq <= info.state.last_seq && seq > 0; seq++) {
    const message = await bus.jsm.streams.getMessage(bus.eventsStream, { seq }).catch(() => undefined);
    if (message && message.subject === bus.subjectFor(eventType))
      result.push(JSON.parse(decoder.decode(message.data)));
  }
  return result;
}

/**
 * The events of one type that `match` accepts, once at least `count` of them are in the stream. A service
 * publishes through its outbox relay after its transaction commits, so a test that saw the state change must
 * still wait for the event (reading the stream at once raced the relay).
 */
export async function waitForStreamMessages(
  bus: Bus,
  eventType: string,
  match: (event: EventEnvelope) => boolean,
  count = 1,
): Promise<EventEnvelope[]> {
  return waitFor(
    async () => {
      const found = (await countStreamMessages(bus, eventType)).filter(match);
      return found.length >= count ? found : undefined;
    },
    { message: `${count} ${eventType} event(s) in the stream` },
  );
}

/**
 * Waits until a durable consumer has acknowledged every event on its subject published so far: the positive
 * signal that it handled them, to be awaited before asserting that something did NOT happen.
 */
export async function waitForConsumerIdle(
  bus: Bus,
  durable: string,
  options: { timeoutMs?: number } = {},
): Promise<void> {
  await waitFor(
    async () => {
      const info = await bus.jsm.consumers.info(bus.eventsStream, durable);
      return info.num_pending === 0 && info.num_ack_pending === 0;
    },
    { timeoutMs: options.timeoutMs ?? 10_000, message: `consumer ${durable} never caught up` },
  );
}
