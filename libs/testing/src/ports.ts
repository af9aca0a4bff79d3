import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

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

/**
 * Below the OS's ephemeral range, ports are handed out in two bands, so that neither kind of user can take the
 * other's port between its check and its bind: restartable servers (findRestartablePort) below this port, blocks of
 * fixed ports (the dev runner started on offset ports by dev-twice) from it up to the ephemeral range. (A chaos run's
 * restartable port once took the port of dev-twice's anvil, checked free a moment before.)
 */
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

/**
 * A free port below the OS's ephemeral range, for a server that is killed and started again on the same port
 * (NATS, Postgres and service replicas in fault tests). An OS-chosen port lies in the ephemeral range, where an
 * outgoing connection may take it while the server is down, and the restart then fails with EADDRINUSE (seen in
 * the chaos run). Below that range only another listener can hold it, and the bind here checks that.
 */
export async function findRestartablePort(): Promise<number> {
  const high = Math.min(FIXED_PORT_BLOCKS_START, ephemeralRangeStart()) - 1;
  const low = RESTARTABLE_PORTS_START;
  for (let attempt = 0; attempt < RESTARTABLE_PORT_ATTEMPTS; attempt++) {
    const candidate = low + Math.floor(Math.random() * (high - low));
    if ((await listenOnce(candidate)) === candidate) return candidate;
  }
  throw new Error(`no free port between ${low} and ${high} after ${RESTARTABLE_PORT_ATTEMPTS} attempts`);
}
