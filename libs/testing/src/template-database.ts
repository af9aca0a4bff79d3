/** A migrated template each suite clones (50 ms, not 1.5 s), named by its migrations' hash: never stale. */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { createDatabase, migrateToLatest, readRepeatableSql, retryStartup } from '@paygate/runtime';
import type { Logger } from '@paygate/telemetry';
import type { Migration } from 'kysely';
import pg from 'pg';

const ROOT = path.join(__dirname, '../../..');

/** The environment variable that hands the template's name to the test processes. */
export const TEMPLATE_DATABASE_ENV = 'PAYGATE_TEST_TEMPLATE_DATABASE';

/** The schema a service's tests use inside a suite database (`escrow-ledger` → `escrow_ledger`). */
export function serviceSchemaName(service: string): string {
  return service.replace(/[^a-z0-9]/g, '_');
}

/** The database URL with another database name, same host and credentials. */
export function databaseUrlFor(baseUrl: string, database: string): string {
  const url = new URL(baseUrl);
  url.pathname = `/${database}`;
  return url.toString();
}

interface ServiceMigrations {
  service: string;
  migrationsDir: string;
  sqlFiles: string[];
}

/** The files of `dir` by absolute path, sorted ([] when there is no such folder). */
const filesOf = (dir: string) =>
  existsSync(dir)
    ? readdirSync(dir)
        .sort()
        .map((file) => path.join(dir, file))
    : [];

function serviceMigrations(): ServiceMigrations[] {
  const servicesDir = path.join(ROOT, 'services');
  return readdirSync(servicesDir)
    .sort()
    .filter((service) => existsSync(path.join(servicesDir, service, 'migrations', 'index.ts')))
    .map((service) => ({
      service,
      migrationsDir: path.join(servicesDir, service, 'migrations'),
      sqlFiles: filesOf(path.join(servicesDir, service, 'sql')).filter((file) => file.endsWith('.sql')),
    }));
}

/** Every file that shapes a migrated schema: the libraries' and services' migrations, the migrator, the SQL. */
export function templateInputFiles(): string[] {
  const libsDir = path.join(ROOT, 'libs');
  return [
    ...readdirSync(libsDir)
      .sort()
      .flatMap((lib) => [
        ...[path.join(libsDir, lib, 'src', 'migrations.ts')].filter((file) => existsSync(file)),
        ...filesOf(path.join(libsDir, lib, 'src', 'migrations')),
      ]),
    path.join(ROOT, 'libs/runtime/src/database.ts'),
    ...serviceMigrations().flatMap((s) => [...filesOf(s.migrationsDir), ...s.sqlFiles]),
  ];
}

function migrationsHash(): string {
  const hash = createHash('sha256');
  for (const file of templateInputFiles()) {
    hash.update(path.relative(ROOT, file)).update('\0').update(readFileSync(file));
  }
  return hash.digest('hex').slice(0, 16);
}

/** Runs `fn` on a connection to `adminUrl`; given a logger, waits out a brief shortage of connection slots. */
export async function withAdmin<T>(
  adminUrl: string,
  fn: (client: pg.Client) => Promise<T>,
  logger?: Logger,
): Promise<T> {
  const connect = async () => {
    const candidate = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 10_000 });
    candidate.on('error', () => undefined);
    await candidate.connect().catch(async (error) => {
      await candidate.end().catch(() => undefined);
      throw error;
    });
    return candidate;
  };
  const client = logger
    ? await retryStartup(connect, { what: 'the test Postgres', attempts: 8, logger })
    : await connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

async function databaseExists(client: pg.Client, name: string): Promise<boolean> {
  const found = await client.query('select 1 from pg_database where datname = $1', [name]);
  return (found.rowCount ?? 0) > 0;
}

async function migrateService(databaseUrl: string, service: ServiceMigrations): Promise<void> {
  const schema = serviceSchemaName(service.service);
  const module = (await import(path.join(service.migrationsDir, 'index.ts'))) as {
    migrations: Record<string, Migration>;
  };
  const repeatableSql = service.sqlFiles.map((file) =>
    readRepeatableSql(path.dirname(service.migrationsDir), path.basename(file)),
  );
  const db = createDatabase<unknown>({ url: databaseUrl, schema, poolSize: 1 });
  try {
    await migrateToLatest(db, schema, module.migrations, undefined, repeatableSql);
  } finally {
    await db.destroy();
  }
}

/** The migrations' template, built when missing (each builder renames its own copy: races are harmless). */
export async function ensureTemplateDatabase(adminUrl: string): Promise<string> {
  const services = serviceMigrations();
  const name = `paygate_template_${migrationsHash()}`;
  if (await withAdmin(adminUrl, (client) => databaseExists(client, name))) return name;

  const building = `${name}_${process.pid}`;
  await withAdmin(adminUrl, (client) => client.query(`create database "${building}"`));
  try {
    const buildingUrl = databaseUrlFor(adminUrl, building);
    for (const service of services) await migrateService(buildingUrl, service);
    await withAdmin(adminUrl, async (client) => {
      if (await databaseExists(client, name)) return;
      await client.query(`alter database "${building}" rename to "${name}"`);
    });
  } finally {
    await withAdmin(adminUrl, (client) => client.query(`drop database if exists "${building}" with (force)`));
  }
  return name;
}

/** Suite databases are named `t_<label>_<random>` (createTestEnvironment). */
export const SUITE_DATABASE_PREFIX = 't_';

/** Closes a finished suite's database, not dropped: each DROP DATABASE is a checkpoint (pages to the WAL). */
export async function retireSuiteDatabase(client: pg.Client, database: string): Promise<void> {
  await client.query(`alter database "${database}" with allow_connections false`);
  await client.query('select pg_terminate_backend(pid) from pg_stat_activity where datname = $1', [database]);
}

/** Drops the retired suite databases (or `names`), eight at a time: waiting drops share one checkpoint. */
export async function dropRetiredSuiteDatabases(
  adminUrl: string,
  options: { names?: readonly string[] } = {},
): Promise<number> {
  const retired = await withAdmin(adminUrl, async (client) => {
    const found = await client.query<{ datname: string }>(
      'select datname from pg_database where not datallowconn and datname ~ $1 and ($2::text[] is null or datname = any($2))',
      [`^${SUITE_DATABASE_PREFIX}[a-z0-9]*_[0-9a-f]+$`, options.names ?? null],
    );
    return found.rows.map((row) => row.datname);
  });
  const queue = [...retired];
  await Promise.all(
    Array.from({ length: Math.min(8, queue.length) }, () =>
      withAdmin(adminUrl, async (client) => {
        for (let name = queue.shift(); name !== undefined; name = queue.shift()) {
          await client.query(`drop database if exists "${name}" with (force)`);
        }
      }),
    ),
  );
  return retired.length;
}
