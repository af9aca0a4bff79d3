import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import {
  type Bus,
  type BusTables,
  connectBus,
  type DeclaredConsumer,
  ensureStreams,
  InboxConsumer,
  isTransientJetStreamError,
  OutboxRelay,
  withTimeout,
} from '@paygate/bus';
import { declaredConsumerSubject, type ServiceName, type Subject } from '@paygate/contracts';
import {
  type AnyRoute,
  bareRoutesOf,
  createApp,
  errorBody,
  errorHandler,
  HttpError,
  mountRoutes,
  notFoundHandler,
  openApiRoute,
} from '@paygate/http';
import { createLogger, type Logger } from '@paygate/telemetry';
import type { ErrorRequestHandler, Express, RequestHandler } from 'express';
import { type Kysely, type Migration, sql, type Transaction } from 'kysely';
import type { CommonConfig } from './config';
import { createPool, databaseOn, migrateToLatest, type RepeatableSql } from './database';
import { NotReadyError, ReadinessTimeoutError, RuntimeReason, UndeclaredConsumerError } from './errors';
import { createMetrics, httpMetricsMiddleware, registerBusMetrics, type ServiceMetrics } from './metrics';
import { describeError, retryStartup } from './retry';
import { transactionRetryingConflicts } from './transaction';

/** What every part of a service is built from. `DB` is the service's own `Database`. */
export interface ServiceContext<DB> {
  name: ServiceName;
  config: CommonConfig;
  db: Kysely<DB>;
  bus: Bus;
  relay: OutboxRelay;
  logger: Logger;
  metrics: ServiceMetrics;
  /**
   * Runs `fn` in one transaction, then wakes the outbox relay. With `retryConflicts`, a run aborted by a
   * deadlock or serialization conflict runs again (bounded; `fn` must keep its effects inside the transaction).
   */
  inTransaction<T>(
    fn: (trx: Transaction<DB>) => Promise<T>,
    options?: { retryConflicts?: boolean },
  ): Promise<T>;
}

export interface BackgroundTask {
  start(): void | Promise<void>;
  stop(): Promise<void>;
}

/** A readiness check: a named one is reported by its name (`chain`), a bare function by its position. */
export type ReadinessCheck = (() => Promise<void>) | { name: string; check: () => Promise<void> };

/** Everything a service serves, consumes and runs, built once by `build`; the runtime starts and stops it. */
export interface ServiceParts<DB> {
  /** Declared routes (`defineRoute`), mounted in order after health, readiness and metrics. */
  routes?: AnyRoute[];
  /** Serves the OpenAPI document of `routes` at `path` (mounted ahead of them). */
  openApi?: { path: string; document: Parameters<typeof openApiRoute>[1] };
  /** Middleware mounted ahead of the routes under a path prefix (CORS headers, …). */
  use?: Array<{ path: string; handlers: Array<RequestHandler | ErrorRequestHandler> }>;
  /** Each built with `defineConsumer` or `consumersOf<DB>()` (libs/bus), which types its handler by its subject. */
  consumers?: DeclaredConsumer<DB>[];
  /** Started after the consumers, in order; stopped (in the same order) once the server closed. */
  tasks?: BackgroundTask[];
  /** Checked by /readyz after Postgres and NATS; each throws when not ready. */
  readinessChecks?: ReadinessCheck[];
  /** Given the server once it listens (a WebSocket upgrade handler). */
  attach?: (server: Server) => void;
  /** First on shutdown, before the server closes (upgraded sockets would keep it open). */
  detach?: () => Promise<void>;
  /** Last on shutdown, after consumers, tasks and the relay stopped and before NATS and Postgres close. */
  stop?: () => Promise<void>;
}

interface CommonDefinition {
  name: ServiceName;
  config: CommonConfig;
  /** The libraries' tables it holds (busMigrations, reorgTombstone/rateLimit ones if used), then its own. */
  migrations: Record<string, Migration>;
  /** Functions and views re-applied after the migrations whenever their text changes (see `applyRepeatableSql`). */
  repeatableSql?: RepeatableSql[];
  logger?: Logger;
  bodyLimit?: string;
  keepRawBody?: boolean;
  /** The most bytes all of a request's headers may take (Node's default: 16 KiB); over it Node answers 431. */
  maxHeaderSize?: number;
}

/** `build` constructs every part from the context; what else it returns is handed back as `parts`. */
interface ServiceDefinition<DB, P extends ServiceParts<DB>> extends CommonDefinition {
  build: (ctx: ServiceContext<DB>) => P | Promise<P>;
}

/** A started service as its supervisor (runMain, a test holding several) sees it, whatever its `Database`. */
export interface StartedService {
  url: string;
  stop(): Promise<void>;
}

export interface RunningService<DB, P extends ServiceParts<DB> = ServiceParts<DB>> extends StartedService {
  ctx: ServiceContext<DB>;
  parts: P;
  app: Express;
  server: Server;
}

const READY_TIMEOUT_MS = 2000;

/** Longer than the 60 s idle timeout of common load balancers and ingresses. */
const SERVER_KEEP_ALIVE_TIMEOUT_MS = 65_000;

/** Connects, migrates, declares streams, builds the parts, starts relay, consumers and tasks, and serves HTTP. */
export async function startService<DB, P extends ServiceParts<DB> = ServiceParts<DB>>(
  definition: ServiceDefinition<DB, P>,
): Promise<RunningService<DB, P>> {
  const { config } = definition;
  const logger = definition.logger ?? createLogger(definition.name, config.logLevel);
  const { db, busTables, bus } = await connect<DB>(definition, logger);
  // A failed start closes what it opened: no connection, subscription or timer is left behind.
  const undo: Array<() => Promise<unknown>> = [() => bus.close(), () => db.destroy()];
  try {
    await migrateToLatest(db, config.dbSchema, definition.migrations, logger, definition.repeatableSql);
    await ensureStreams(bus, { replicas: config.natsStreamReplicas });
    const relay = new OutboxRelay(busTables, bus, logger);
    const ctx = serviceContext(definition, {
      db,
      bus,
      relay,
      logger,
      metrics: createMetrics(definition.name),
    });
    registerBusMetrics(ctx.metrics.registry, bus, definition.name);
    const parts = await definition.build(ctx);
    if (parts.stop) undo.unshift(parts.stop);
    const app = serviceApp(definition, ctx, parts);

    const { consumers, tasks } = await startWork(ctx, parts, undo);
    const server = await listen(definition, ctx, app);
    if (parts.detach) undo.unshift(parts.detach);
    parts.attach?.(server);
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : config.port;
    const url = `http://127.0.0.1:${port}`;
    logger.info(
      { port, schema: config.dbSchema, namespace: config.eventNamespace },
      `${definition.name} listening on ${url}`,
    );

    let stopped = false;
    return {
      ctx,
      parts,
      app,
      server,
      url,
      async stop() {
        if (stopped) return;
        stopped = true;
        await parts.detach?.().catch(() => undefined);
        server.closeAllConnections?.();
        await new Promise<void>((resolve) => server.close(() => resolve()));
        for (const task of tasks) await task.stop().catch(() => undefined);
        for (const consumer of consumers) await consumer.stop().catch(() => undefined);
        await relay.stop();
        await parts.stop?.().catch(() => undefined);
        await bus.close();
        await db.destroy();
      },
    };
  } catch (error) {
    for (const step of undo) await step().catch(() => undefined);
    throw error;
  }
}

/** The relay, consumers and tasks, each added to `undo` as it starts (a later failure stops what runs). */
async function startWork<DB>(
  ctx: ServiceContext<DB>,
  parts: ServiceParts<DB>,
  undo: Array<() => Promise<unknown>>,
): Promise<{ consumers: InboxConsumer<Subject, DB>[]; tasks: BackgroundTask[] }> {
  const consumerOptions = parts.consumers ?? [];
  // A service's NATS user may use only the consumers contracts declare (CONSUMERS): refused on any NATS.
  for (const { durable, subject } of consumerOptions) {
    const declared = declaredConsumerSubject(ctx.name, durable);
    if (declared !== subject) throw new UndeclaredConsumerError(ctx.name, durable, subject, declared);
  }
  ctx.relay.start();
  undo.unshift(() => ctx.relay.stop());
  // Each on the service's inbox; each handled event is counted and wakes the outbox relay.
  const consumers = consumerOptions.map(
    (options) =>
      new InboxConsumer(ctx.bus, ctx.db, ctx.logger, {
        ...options,
        afterCommit: (event) => {
          ctx.metrics.eventsHandled.inc({ consumer: options.durable, outcome: 'ok' });
          ctx.relay.kick();
          options.afterCommit?.(event);
        },
      }),
  );
  for (const consumer of consumers) undo.unshift(() => consumer.stop());
  // Started together and all settled before a failure is thrown, so undo never stops one still starting.
  // Their JetStream requests can time out while a cluster elects leaders: retried like the connection.
  const started = await Promise.allSettled(
    consumers.map((consumer, index) =>
      retryStartup(() => consumer.start(), {
        what: `JetStream for consumer ${consumerOptions[index]!.durable}`,
        attempts: ctx.config.startupAttempts,
        logger: ctx.logger,
        retryable: isTransientJetStreamError,
      }),
    ),
  );
  const failed = started.find((result) => result.status === 'rejected');
  if (failed) throw failed.reason;
  const tasks = parts.tasks ?? [];
  for (const task of tasks) {
    undo.unshift(() => task.stop());
    await task.start();
  }
  return { consumers, tasks };
}

/** Postgres, then NATS, each with bounded retries; the pool is closed again when NATS cannot be reached. */
async function connect<DB>(
  definition: CommonDefinition,
  logger: Logger,
): Promise<{ db: Kysely<DB>; busTables: Kysely<BusTables>; bus: Bus }> {
  const { config } = definition;
  const pool = createPool({ url: config.databaseUrl, schema: config.dbSchema, ...config.database });
  const db = databaseOn<DB>(pool, config.dbSchema);
  // The relay's handle on the bus's tables (outbox, inbox), on the same pool, ended with `db`.
  const busTables = databaseOn<BusTables>(pool, config.dbSchema);
  try {
    await retryStartup(() => sql`select 1`.execute(db), {
      what: `Postgres at ${new URL(config.databaseUrl).host}`,
      attempts: config.startupAttempts,
      logger,
    });
    const bus = await retryStartup(
      () =>
        connectBus({
          url: config.natsUrl,
          namespace: config.eventNamespace,
          name: definition.name,
          timeoutMs: 3000,
          user: config.natsCredentials?.user,
          password: config.natsCredentials?.password,
          caFile: config.natsCaFile,
        }),
      { what: `NATS at ${config.natsUrl}`, attempts: config.startupAttempts, logger },
    );
    return { db, busTables, bus };
  } catch (error) {
    await db.destroy();
    throw error;
  }
}

function serviceContext<DB>(
  definition: CommonDefinition,
  parts: Pick<ServiceContext<DB>, 'db' | 'bus' | 'relay' | 'logger' | 'metrics'>,
): ServiceContext<DB> {
  const { db, relay, logger } = parts;
  return {
    name: definition.name,
    config: definition.config,
    ...parts,
    async inTransaction(fn, options) {
      const result = options?.retryConflicts
        ? await transactionRetryingConflicts(db, fn, (error, attempt) =>
            logger.warn(
              { reason: describeError(error), attempt },
              'transaction aborted by a conflict (deadlock or serialization); running it again',
            ),
          )
        : await db.transaction().execute(fn);
      relay.kick();
      return result;
    },
  };
}

/** The service's express app: /healthz, /readyz, /metrics, its routes, then the 404 and error handlers. */
function serviceApp<DB>(
  definition: CommonDefinition,
  ctx: ServiceContext<DB>,
  parts: ServiceParts<DB>,
): Express {
  const { logger, metrics, relay } = ctx;
  const app = createApp({
    logger,
    bodyLimit: definition.bodyLimit,
    keepRawBody: definition.keepRawBody,
    trustedProxies: ctx.config.trustedProxies,
  });
  app.use(httpMetricsMiddleware(metrics));
  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok', service: definition.name });
  });
  const checks = readinessChecks(ctx, parts.readinessChecks ?? []);
  // Ready: 200 { status, checks }; not: 503 in the error envelope, every check's answer in `error.checks`.
  app.get('/readyz', async (req, res) => {
    const results: Record<string, string> = {};
    const failed: string[] = [];
    for (const [name, check] of checks) {
      try {
        await withTimeout(check(), READY_TIMEOUT_MS, () => new ReadinessTimeoutError(name, READY_TIMEOUT_MS));
        results[name] = 'ok';
      } catch (error) {
        failed.push(name);
        results[name] = (error as Error).message;
      }
    }
    metrics.ready.set(failed.length === 0 ? 1 : 0);
    if (failed.length === 0) {
      res.json({ status: 'ready', checks: results });
      return;
    }
    const notReady = new HttpError(503, RuntimeReason.NotReady, `not ready: ${failed.join(', ')}`, {
      checks: results,
    });
    res.status(503).json(errorBody(notReady, req.requestId));
  });
  app.get('/metrics', async (_req, res) => {
    metrics.outboxBacklog.set(await relay.backlog().catch(() => -1));
    res.setHeader('content-type', metrics.registry.contentType);
    res.send(await metrics.registry.metrics());
  });
  for (const { path, handlers } of parts.use ?? []) app.use(path, ...handlers);
  if (parts.routes) {
    const { openApi, routes } = parts;
    mountRoutes(app, openApi ? [openApiRoute(openApi.path, openApi.document, routes), ...routes] : routes);
  }
  app.use(notFoundHandler());
  app.use(errorHandler(logger));
  return app;
}

/** Postgres and NATS, then the service's own checks, each by name. */
function readinessChecks<DB>(
  ctx: ServiceContext<DB>,
  own: ReadinessCheck[],
): Array<[string, () => Promise<void>]> {
  return [
    ['postgres', async () => void (await sql`select 1`.execute(ctx.db))],
    [
      'nats',
      async () => {
        if (ctx.bus.nc.isClosed()) throw new NotReadyError('connection closed');
        await ctx.bus.nc.flush();
      },
    ],
    ...own.map((check, i): [string, () => Promise<void>] =>
      typeof check === 'function' ? [`check_${i}`, check] : [check.name, check.check],
    ),
  ];
}

/** Serves the app; a request goes first to the bare routes whose prefix it matches, then to express. */
function listen<DB>(definition: CommonDefinition, ctx: ServiceContext<DB>, app: Express): Promise<Server> {
  return new Promise<Server>((resolve, reject) => {
    const bare = bareRoutesOf(app);
    const handler =
      bare.length === 0
        ? app
        : (req: IncomingMessage, res: ServerResponse) => {
            const url = req.url ?? '';
            for (const route of bare) if (url.startsWith(route.prefix) && route.handle(req, res)) return;
            app(req, res);
          };
    const server = createServer({ maxHeaderSize: definition.maxHeaderSize }, handler);
    // Idle keep-alive sockets outlive the proxies' own: closed first, a request sent on one would fail.
    server.keepAliveTimeout = SERVER_KEEP_ALIVE_TIMEOUT_MS;
    server.headersTimeout = SERVER_KEEP_ALIVE_TIMEOUT_MS + 1000;
    server.listen(ctx.config.port, '0.0.0.0', () => resolve(server));
    server.once('error', reject);
  });
}
