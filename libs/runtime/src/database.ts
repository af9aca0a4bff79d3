import { busMigrations } from '@paygate/bus';
import type { Logger } from '@paygate/telemetry';
import { Kysely, type Migration, type MigrationProvider, Migrator, PostgresDialect, sql } from 'kysely';
import pg from 'pg';

// Postgres numeric and bigint come back as strings: money columns are read as bigint explicitly.
pg.types.setTypeParser(20, (value) => BigInt(value));

export interface DatabaseOptions {
  url: string;
  schema: string;
  poolSize?: number;
  statementTimeoutMs?: number;
}

/** A Kysely instance whose every connection works inside the service's own schema (search_path). */
export function createDatabase<DB>(options: DatabaseOptions): Kysely<DB> {
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.poolSize ?? 10,
    connectionTimeoutMillis: 5000,
    idleTimeoutMillis: 30_000,
    options: `-c search_path=${options.schema} -c statement_timeout=${options.statementTimeoutMs ?? 15_000}`,
  });
  pool.on('error', () => undefined); // a dropped idle client is replaced on next use
  return new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
}

class StaticMigrationProvider implements MigrationProvider {
  constructor(private readonly migrations: Record<string, Migration>) {}
  async getMigrations() {
    return this.migrations;
  }
}

/**
 * Creates the schema if needed and runs the bus migrations plus the service's own, with kysely's
 * bookkeeping table inside that schema. Concurrent replicas are serialised by kysely's migration lock.
 */
export async function migrateToLatest(
  db: Kysely<any>,
  schema: string,
  migrations: Record<string, Migration>,
  logger?: Logger,
): Promise<void> {
  await sql`create schema if not exists ${sql.id(schema)}`.execute(db);
  const migrator = new Migrator({
    db,
    provider: new StaticMigrationProvider({ ...busMigrations, ...migrations }),
    migrationTableSchema: schema,
  });
  const { error, results } = await migrator.migrateToLatest();
  for (const result of results ?? []) {
    if (result.status === 'Success') logger?.info({ migration: result.migrationName }, 'migration applied');
    if (result.status === 'Error') logger?.error({ migration: result.migrationName }, 'migration failed');
  }
  if (error) throw error;
}

export async function dropSchema(db: Kysely<any>, schema: string): Promise<void> {
  await sql`drop schema if exists ${sql.id(schema)} cascade`.execute(db);
}
