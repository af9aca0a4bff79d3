/**
 * What Postgres did during a load run, from its statistics views: commits, and rows written by table (each
 * service's schema apart). Divided by the paid calls served, it says how many commits and writes one call costs.
 */
import pg from 'pg';

interface Counts {
  commits: number;
  rowsByTable: Map<string, number>;
}

async function read(databaseUrl: string): Promise<Counts> {
  const client = new pg.Client({ connectionString: databaseUrl, statement_timeout: 10_000 });
  await client.connect();
  try {
    // The statistics a backend gathered reach the views when its transaction ends: read a fresh snapshot.
    await client.query('select pg_stat_clear_snapshot()');
    const commits = await client.query<{ commits: string }>(
      'select xact_commit::text as commits from pg_stat_database where datname = current_database()',
    );
    const tables = await client.query<{ name: string; rows: string }>(
      `select schemaname || '.' || relname as name, (n_tup_ins + n_tup_upd + n_tup_del)::text as rows
         from pg_stat_user_tables`,
    );
    return {
      commits: Number(commits.rows[0]?.commits ?? 0),
      rowsByTable: new Map(tables.rows.map((r) => [r.name, Number(r.rows)])),
    };
  } finally {
    await client.end().catch(() => undefined);
  }
}

export interface PostgresWork {
  commits: number;
  /** Rows inserted, updated or deleted, by schema.table, most first (tables with none left out). */
  rowsWrittenByTable: Array<{ table: string; rows: number }>;
}

/** Counts from now until `stop()`. */
export async function measurePostgresWork(databaseUrl: string): Promise<{ stop(): Promise<PostgresWork> }> {
  const atStart = await read(databaseUrl);
  return {
    async stop() {
      const now = await read(databaseUrl);
      return {
        commits: now.commits - atStart.commits,
        rowsWrittenByTable: [...now.rowsByTable]
          .map(([table, rows]) => ({ table, rows: rows - (atStart.rowsByTable.get(table) ?? 0) }))
          .filter((t) => t.rows > 0)
          .sort((a, b) => b.rows - a.rows),
      };
    },
  };
}
