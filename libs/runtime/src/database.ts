import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Logger } from '@paygate/telemetry';
import {
  type DatabaseIntrospector,
  type DatabaseMetadata,
  Kysely,
  type Migration,
  type MigrationLockOptions,
  Migrator,
  PostgresAdapter,
  PostgresDialect,
  type RawBuilder,
  type SchemaMetadata,
  sql,
  type TableMetadata,
} from 'kysely';
import pg from 'pg';
import { type DatabaseLimits, DEFAULT_DATABASE_LIMITS } from './config';
import { DatabaseSetupError } from './errors';

// Postgres numeric and bigint come back as strings: money columns are read as bigint explicitly.
pg.types.setTypeParser(20, (value) => BigInt(value));

interface DatabaseOptions extends Partial<DatabaseLimits> {
  url: string;
  schema: string;
}

/** Kysely's introspector reads every schema, failing when another service drops one mid-query: scoped. */
class SchemaScopedIntrospector implements DatabaseIntrospector {
  constructor(
    private readonly db: Kysely<unknown>,
    private readonly schema: string,
  ) {}

  async getSchemas(): Promise<SchemaMetadata[]> {
    const rows = await sql<{ name: string }>`
      select nspname as name from pg_catalog.pg_namespace where nspname = ${this.schema}`.execute(this.db);
    return rows.rows.map((row) => ({ name: row.name }));
  }

  async getTables(): Promise<TableMetadata[]> {
    const rows = await sql<{ name: string; is_view: boolean }>`
      select c.relname as name, c.relkind = 'v' as is_view
      from pg_catalog.pg_class c join pg_catalog.pg_namespace ns on ns.oid = c.relnamespace
      where ns.nspname = ${this.schema} and c.relkind in ('r', 'v', 'p')`.execute(this.db);
    return rows.rows.map((row) => ({
      name: row.name,
      schema: this.schema,
      isView: row.is_view,
      columns: [],
    }));
  }

  async getMetadata(): Promise<DatabaseMetadata> {
    return { tables: await this.getTables() };
  }
}

/** The first key of the two-key advisory lock a schema's migrations take ("pgmg"); the second is the schema's hash. */
const MIGRATION_LOCK_CLASS = 0x70676d67;
const MIGRATION_LOCK_WAIT_MS = 5 * 60_000;
const UNIQUE_VIOLATION = '23505';

/** kysely's migration lock is one per database; each service migrates only its schema, so it locks that. */
class SchemaMigrationLockAdapter extends PostgresAdapter {
  override async acquireMigrationLock(db: Kysely<unknown>, options: MigrationLockOptions): Promise<void> {
    // Bounded, but past the pool's lock_timeout: a replica waits for another's migrations instead of failing.
    await sql`
      with bounded as (select set_config('lock_timeout', ${String(MIGRATION_LOCK_WAIT_MS)}, true))
      select pg_advisory_lock(${MIGRATION_LOCK_CLASS}, hashtext(${lockedSchema(options)})) from bounded`.execute(
      db,
    );
  }

  override async releaseMigrationLock(db: Kysely<unknown>, options: MigrationLockOptions): Promise<void> {
    await sql`select pg_advisory_unlock(${MIGRATION_LOCK_CLASS}, hashtext(${lockedSchema(options)}))`.execute(
      db,
    );
  }
}

function lockedSchema(options: MigrationLockOptions): string {
  if (!options.lockTableSchema) throw new DatabaseSetupError('a migration lock needs the schema it migrates');
  return options.lockTableSchema;
}

class SchemaScopedPostgresDialect extends PostgresDialect {
  constructor(
    config: ConstructorParameters<typeof PostgresDialect>[0],
    private readonly schema: string,
  ) {
    super(config);
  }

  override createIntrospector(db: Kysely<unknown>): DatabaseIntrospector {
    return new SchemaScopedIntrospector(db, this.schema);
  }

  override createAdapter(): PostgresAdapter {
    return new SchemaMigrationLockAdapter();
  }
}

/** The comment that opens a statement marked by `preparedStatement`, with the name it is prepared under. */
const PREPARED_MARKER = /^\/\* prepared:([a-z][a-z0-9_]*) \*\//;

/**
 * Marks a hot statement to be prepared once per pooled connection, first in the template:
 * sql`${preparedStatement('ledger_claims')} with ...`. One name, one text, and every result column named (no
 * `*`: a migration adding a column would make Postgres refuse the cached plan).
 */
export function preparedStatement(name: string): RawBuilder<unknown> {
  if (!/^[a-z][a-z0-9_]*$/.test(name))
    throw new DatabaseSetupError(`prepared statement name ${name}: lowercase letters, digits, _`);
  return sql.raw(`/* prepared:${name} */`);
}

/** Sends the statements marked by preparedStatement under their name (kysely calls query(text, values)). */
function prepareMarkedStatements(client: pg.PoolClient): void {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  client.query = ((text: unknown, ...rest: unknown[]) => {
    const name = typeof text === 'string' ? PREPARED_MARKER.exec(text)?.[1] : undefined;
    if (name === undefined || rest.length !== 1 || !Array.isArray(rest[0])) return query(text, ...rest);
    return query({ name, text, values: rest[0] });
  }) as typeof client.query;
}

/** A Kysely instance whose every connection works inside the service's own schema (search_path). */
export function createDatabase<DB>(options: DatabaseOptions): Kysely<DB> {
  return databaseOn<DB>(createPool(options), options.schema);
}

/** A handle typed with `DB` over a createPool pool (several may share one); destroying one ends the pool. */
export function databaseOn<DB>(pool: pg.Pool, schema: string): Kysely<DB> {
  return new Kysely<DB>({ dialect: new SchemaScopedPostgresDialect({ pool }, schema) });
}

export function createPool(options: DatabaseOptions): pg.Pool {
  // Every wait is bounded: for a pooled connection, a statement, a lock, a transaction left open.
  // An option left undefined keeps its default.
  const set = Object.entries(options).filter(([, value]) => value !== undefined);
  const limits: DatabaseLimits = { ...DEFAULT_DATABASE_LIMITS, ...Object.fromEntries(set) };
  const pool = new pg.Pool({
    connectionString: options.url,
    max: limits.poolSize,
    connectionTimeoutMillis: limits.connectTimeoutMs,
    idleTimeoutMillis: limits.idleTimeoutMs,
    options: [
      `-c search_path=${options.schema}`,
      `-c statement_timeout=${limits.statementTimeoutMs}`,
      `-c lock_timeout=${limits.lockTimeoutMs}`,
      `-c idle_in_transaction_session_timeout=${limits.idleInTransactionTimeoutMs}`,
    ].join(' '),
  });
  pool.on('error', () => undefined); // a dropped idle client is replaced on next use
  // A checked-out client's 'error' (its backend ended) would crash the service; its next statement fails instead.
  pool.on('connect', (client) => {
    client.on('error', () => undefined);
    prepareMarkedStatements(client);
  });
  return pool;
}

/** Creates the schema if needed and runs `migrations` (kysely's table in it), one replica at a time. */
export async function migrateToLatest<DB>(
  db: Kysely<DB>,
  schema: string,
  migrations: Record<string, Migration>,
  logger?: Logger,
  repeatableSql: RepeatableSql[] = [],
): Promise<void> {
  await sql`create schema if not exists ${sql.id(schema)}`.execute(db).catch((error) => {
    // `if not exists` is not atomic: replicas starting together fail on the catalog's unique index.
    if (error?.code !== UNIQUE_VIOLATION) throw error;
  });
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => migrations },
    migrationTableSchema: schema,
  });
  const { error, results } = await migrator.migrateToLatest();
  for (const result of results ?? []) {
    if (result.status === 'Success') logger?.info({ migration: result.migrationName }, 'migration applied');
    if (result.status === 'Error') logger?.error({ migration: result.migrationName }, 'migration failed');
  }
  if (error) throw error;
  await applyRepeatableSql(db, schema, repeatableSql, logger);
}

/** Functions and views defined once (`create or replace`), applied after migrations when changed. */
export interface RepeatableSql {
  name: string;
  sql: string;
}

/** Reads `<package>/sql/<file>` from a module's directory, walking up from `dist/` or `src/` (bounded). */
export function readRepeatableSql(fromDir: string, file: string): RepeatableSql {
  let dir = fromDir;
  for (let depth = 0; depth < 5; depth++) {
    const candidate = join(dir, 'sql', file);
    if (existsSync(candidate)) return { name: file, sql: readFileSync(candidate, 'utf8') };
    dir = dirname(dir);
  }
  throw new DatabaseSetupError(`repeatable SQL file sql/${file} not found above ${fromDir}`);
}

/** Applies each script whose checksum changed, one transaction each, under the schema's advisory lock. */
export async function applyRepeatableSql<DB>(
  db: Kysely<DB>,
  schema: string,
  scripts: RepeatableSql[],
  logger?: Logger,
): Promise<void> {
  if (scripts.length === 0) return;
  await sql`create table if not exists ${sql.id(schema, 'repeatable_sql')} (
    name text primary key, checksum text not null, applied_at timestamptz not null default now())`.execute(
    db,
  );
  for (const script of scripts) {
    const checksum = createHash('sha256').update(script.sql).digest('hex');
    await db.transaction().execute(async (trx) => {
      await sql`select pg_advisory_xact_lock(hashtextextended(${`runtime:repeatable-sql:${schema}`}, 0))`.execute(
        trx,
      );
      const recorded = await sql<{ checksum: string }>`
        select checksum from ${sql.id(schema, 'repeatable_sql')} where name = ${script.name}`.execute(trx);
      if (recorded.rows[0]?.checksum === checksum) return;
      await sql.raw(script.sql).execute(trx);
      await sql`insert into ${sql.id(schema, 'repeatable_sql')} (name, checksum) values (${script.name}, ${checksum})
        on conflict (name) do update set checksum = excluded.checksum, applied_at = now()`.execute(trx);
      logger?.info({ script: script.name, checksum }, 'repeatable SQL applied');
    });
  }
}

export async function dropSchema<DB>(db: Kysely<DB>, schema: string): Promise<void> {
  await sql`drop schema if exists ${sql.id(schema)} cascade`.execute(db);
}
