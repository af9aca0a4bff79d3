import { linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** A TCP port that was free a moment ago on 127.0.0.1 (the OS picks it, from its ephemeral range). */
export function findFreePort(): Promise<number> {
  return listenOnce(0).then((port) => {
    if (port === undefined) throw new Error('could not allocate a port');
    return port;
  });
}

/** Binds `port` on all addresses and closes it: the port bound, or undefined when it is taken. */
function listenOnce(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(undefined));
    server.listen(port, '0.0.0.0', () => {
      const address = server.address();
      server.close(() => resolve(address && typeof address === 'object' ? address.port : undefined));
    });
  });
}

/** Two bands below the ephemeral range, so neither kind of user takes the other's port: restartable, then fixed. */
export const FIXED_PORT_BLOCKS_START = 18_000;
const RESTARTABLE_PORTS_START = 10_000;

/** The first port of the OS's ephemeral range (Linux's ip_local_port_range; 32768 where it cannot be read). */
export function ephemeralRangeStart(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 1024 ? low : 32768;
  } catch {
    return 32768;
  }
}

const RESTARTABLE_PORT_ATTEMPTS = 200;

/** A leased port for a server restarted on it, below the ephemeral range: no outgoing connection takes it. */
export async function findRestartablePort(): Promise<number> {
  const high = Math.min(FIXED_PORT_BLOCKS_START, ephemeralRangeStart()) - 1;
  const low = RESTARTABLE_PORTS_START;
  for (let attempt = 0; attempt < RESTARTABLE_PORT_ATTEMPTS; attempt++) {
    const candidate = low + Math.floor(Math.random() * (high - low));
    if (!leasePort(candidate)) continue;
    if ((await listenOnce(candidate)) === candidate) return candidate;
    releasePort(candidate);
  }
  throw new Error(`no free port between ${low} and ${high} after ${RESTARTABLE_PORT_ATTEMPTS} attempts`);
}

const LEASE_DIR = path.join(tmpdir(), 'paygate-restartable-ports');
const leasedPorts = new Set<number>();
let releasesOnExit = false;

/** Takes `port` for this process: a file of its pid, linked into place (atomic); a dead one's lease is taken. */
export function leasePort(port: number): boolean {
  if (leasedPorts.has(port)) return false;
  mkdirSync(LEASE_DIR, { recursive: true });
  const file = path.join(LEASE_DIR, String(port));
  const draft = `${file}.${process.pid}`;
  writeFileSync(draft, String(process.pid));
  try {
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        linkSync(draft, file);
        if (!releasesOnExit) process.once('exit', releaseAllPorts);
        releasesOnExit = true;
        leasedPorts.add(port);
        return true;
      } catch {
        if (isAlive(Number(readLease(file)))) return false;
        try {
          unlinkSync(file);
        } catch {}
      }
    }
    return false;
  } finally {
    unlinkSync(draft);
  }
}

function readLease(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

export function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export function releasePort(port: number): void {
  leasedPorts.delete(port);
  try {
    unlinkSync(path.join(LEASE_DIR, String(port)));
  } catch {}
}

function releaseAllPorts(): void {
  for (const port of [...leasedPorts]) releasePort(port);
}
