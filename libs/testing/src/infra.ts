import { randomBytes } from 'node:crypto';
import { type Bus, connectBus, deleteStreams, ensureStreams } from '@paygate/bus';
import type { EventEnvelope } from '@paygate/contracts';
import { createDatabase } from '@paygate/runtime';
import { createLogger, type Logger } from '@paygate/telemetry';
import { type Kysely, sql } from 'kysely';
import type { Subscription } from 'nats';
import {
  databaseUrlFor,
  retireSuiteDatabase,
  SUITE_DATABASE_PREFIX,
  serviceSchemaName,
  TEMPLATE_DATABASE_ENV,
  withAdmin,
} from './template-database';

export const TEST_DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const TEST_NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

export function randomSuffix(bytes = 4): string {
  return randomBytes(bytes).toString('hex');
}

/** A suite's own event namespace and Postgres database (a template clone); `cleanup` deletes and retires them. */
export interface TestEnvironment {
  id: string;
  namespace: string;
  databaseUrl: string;
  natsUrl: string;
  logger: Logger;
  schemaFor(service: string): string;
  envFor(service: string, extra?: Record<string, string>): NodeJS.ProcessEnv;
  bus(): Promise<Bus>;
  cleanup(): Promise<void>;
}

/** The suite databases holding each schema `schemaFor` handed out, for `openSchema` (module state is per suite). */
const suiteDatabasesBySchema = new Map<string, Set<string>>();

/** The suite's database from the template; under jest commits skip the fsync (benchmarks keep production's). */
function createSuiteDatabase(database: string, settings: Record<string, string>, logger: Logger) {
  const template = process.env[TEMPLATE_DATABASE_ENV];
  const durability = process.env.JEST_WORKER_ID === undefined ? {} : { synchronous_commit: 'off' };
  return withAdmin(
    TEST_DATABASE_URL,
    async (client) => {
      await client.query(`create database "${database}"${template ? ` template "${template}"` : ''}`);
      for (const [name, value] of Object.entries({ ...durability, ...settings })) {
        await client.query(
          `alter database "${database}" set ${client.escapeIdentifier(name)} = ${client.escapeLiteral(value)}`,
        );
      }
    },
    logger,
  );
}

/** `databaseSettings`: server settings of every connection to the suite's database (deadlock_timeout, say). */
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
      suiteDatabasesBySchema.set(schema, (suiteDatabasesBySchema.get(schema) ?? new Set()).add(databaseUrl));
      return schema;
    },
    envFor(service, extra = {}) {
      return {
        DATABASE_URL: databaseUrl,
        NATS_URL: TEST_NATS_URL,
        DB_SCHEMA: env.schemaFor(service),
        EVENT_NAMESPACE: namespace,
        PORT: '0',
        LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
        // Workers of up to seven services share 100 Postgres connections: small pools, patient startup.
        STARTUP_ATTEMPTS: '8',
        DB_POOL_SIZE: '4',
        DB_IDLE_TIMEOUT_MS: '5000',
        DB_CONNECT_TIMEOUT_MS: '15000',
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
      await withAdmin(TEST_DATABASE_URL, (client) => retireSuiteDatabase(client, database), logger);
    },
  };
  return env;
}

/** A handle into a schema in the environment that handed it out (else the shared test database), for assertions. */
export function openSchema<DB>(schema: string): Kysely<DB> {
  const databases = [...(suiteDatabasesBySchema.get(schema) ?? [])];
  if (databases.length > 1) {
    throw new Error(`schema ${schema} is in ${databases.length} live test environments: clean one up first`);
  }
  return createDatabase<DB>({ url: databases[0] ?? TEST_DATABASE_URL, schema, idleTimeoutMs: 5000 });
}

/** Polls `probe` until it is truthy, or fails after `timeoutMs` with `message` (a function is asked only then). */
export async function waitFor<T>(
  probe: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  options: { timeoutMs?: number; intervalMs?: number; message?: string | (() => Promise<string>) } = {},
): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 20_000;
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

/** Records every event published on a subject (a core NATS subscription sees JetStream publishes too). */
export class EventRecorder {
  readonly events: EventEnvelope[] = [];
  private readonly subscription: Subscription;

  constructor(bus: Bus, eventType: string) {
    const decoder = new TextDecoder();
    this.subscription = bus.nc.subscribe(bus.subjectFor(eventType), {
      // The outbox relay publishes again when an ack came late (JetStream deduplicates): record each event once.
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

  /** The first recorded event whose data matches: safer than a count, which also hears other tests' late events. */
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

/** The events of one type that `match` accepts, once one is in the stream (the outbox relay publishes late). */
export async function waitForStreamMessages(
  bus: Bus,
  eventType: string,
  match: (event: EventEnvelope) => boolean,
): Promise<EventEnvelope[]> {
  return waitFor(
    async () => {
      const found = (await countStreamMessages(bus, eventType)).filter(match);
      return found.length > 0 ? found : undefined;
    },
    { message: `a ${eventType} event in the stream` },
  );
}

/** Waits until a durable consumer acknowledged everything so far: before asserting something did NOT happen. */
export async function waitForConsumerIdle(bus: Bus, durable: string): Promise<void> {
  await waitFor(
    async () => {
      const info = await bus.jsm.consumers.info(bus.eventsStream, durable);
      return info.num_pending === 0 && info.num_ack_pending === 0;
    },
    { timeoutMs: 10_000, message: `consumer ${durable} never caught up` },
  );
}

/** Holds `table` access exclusive until `release()` (every read waits: a cache's read stays in flight). */
export async function holdTableLock<DB>(
  db: Kysely<DB>,
  table: string,
): Promise<{ release(): Promise<void> }> {
  let letGo!: () => void;
  const released = new Promise<void>((resolve) => (letGo = resolve));
  let locked!: () => void;
  const lockTaken = new Promise<void>((resolve) => (locked = resolve));
  const holder = db.transaction().execute(async (trx) => {
    await sql`lock table ${sql.table(table)} in access exclusive mode`.execute(trx);
    locked();
    await released;
  });
  await Promise.race([lockTaken, holder]);
  return {
    async release() {
      letGo();
      await holder;
    },
  };
}
