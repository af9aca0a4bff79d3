/**
 * `make dev` stops within seconds of SIGTERM and of SIGINT (Ctrl-C), even after use that leaves connections
 * open: a widget's WebSocket through the edge and a keep-alive HTTP connection. Before, the runner waited for
 * the edge to close, which never happened while a browser held a socket: the demo ports stayed bound for
 * minutes and SIGTERM did nothing. Each run: start the real dev runner, open those connections, signal it,
 * and every one of its ports must be free again within a few seconds.
 *
 *   npx jest deploy/test/dev-signals
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import {
  randomSuffix,
  type ServiceProcess,
  spawnTsProcess,
  TEST_DATABASE_URL,
  TEST_NATS_URL,
  waitFor,
} from '@paygate/testing';
import { resetDevState } from '../dev/reset';
import routeTable from '../routes.json';

const id = randomSuffix(3);
const NAMESPACE = `devsig${id}`;
const SCHEMA_PREFIX = `devsig_${id}_`;
const SCHEMAS = ['registry', 'gateway', 'checkout', 'indexer', 'ledger', 'settlement', 'notifier'].map(
  (schema) => `${SCHEMA_PREFIX}${schema}`,
);
const BASE_PORTS = [8080, ...Object.values(routeTable.services).map((s) => s.port), 8090, 8091, 8545];
/** What "within seconds" means here, on a busy 2-core machine. */
const STOP_WITHIN_MS = 12_000;

function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '0.0.0.0', () => server.close(() => resolve(true)));
  });
}

async function busyPorts(offset: number): Promise<number[]> {
  const busy: number[] = [];
  for (const port of BASE_PORTS) if (!(await portIsFree(port + offset))) busy.push(port + offset);
  return busy;
}

function ephemeralPortStart(): number {
  try {
    return (
      Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || 32768
    );
  } catch {
    return 32768;
  }
}

async function freeOffset(): Promise<number> {
  const slots = Math.floor((ephemeralPortStart() - 1 - Math.max(...BASE_PORTS) - 10_000) / 10);
  for (let attempt = 0; attempt < 20; attempt++) {
    const offset = 10_000 + Math.floor(Math.random() * slots) * 10;
    if ((await busyPorts(offset)).length === 0) return offset;
  }
  throw new Error('no free block of ports for the dev runner');
}

/** A WebSocket as the widget opens it, through the edge to the notifier, held open (raw upgrade, no library). */
function openWidgetSocket(edgePort: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(edgePort, '127.0.0.1', () => {
      socket.write(
        [
          'GET /api/v1/ws HTTP/1.1',
          `Host: 127.0.0.1:${edgePort}`,
          'Upgrade: websocket',
          'Connection: Upgrade',
          `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`,
          'Sec-WebSocket-Version: 13',
          '',
          '',
        ].join('\r\n'),
      );
    });
    socket.once('data', (chunk) => {
      if (chunk.toString().startsWith('HTTP/1.1 101')) resolve(socket);
      else reject(new Error(`no upgrade: ${chunk.toString().split('\r\n')[0]}`));
    });
    socket.once('error', reject);
    socket.on('error', () => undefined);
  });
}

/** A keep-alive HTTP connection that asked one question and stays open. */
function openKeepAlive(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => {
      socket.write(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: keep-alive\r\n\r\n`);
    });
    socket.once('data', () => resolve(socket));
    socket.once('error', reject);
    socket.on('error', () => undefined);
  });
}

describe('make dev stops within seconds of a signal, with connections still open', () => {
  let runner: ServiceProcess | undefined;
  const sockets: net.Socket[] = [];

  afterEach(async () => {
    for (const socket of sockets.splice(0)) socket.destroy();
    await runner?.kill('SIGKILL');
  });

  afterAll(async () => {
    await resetDevState({ databaseUrl: TEST_DATABASE_URL, natsUrl: TEST_NATS_URL }, NAMESPACE, SCHEMAS);
  });

  it.each(['SIGTERM', 'SIGINT'] as const)(
    '%s: the runner exits and every port it bound is free again',
    async (signal) => {
      const offset = await freeOffset();
      runner = spawnTsProcess('deploy/dev/main.ts', {
        DATABASE_URL: TEST_DATABASE_URL,
        NATS_URL: TEST_NATS_URL,
        DEV_PORT_OFFSET: String(offset),
        DEV_NAMESPACE: NAMESPACE,
        DEV_SCHEMA_PREFIX: SCHEMA_PREFIX,
        LOG_LEVEL: 'warn',
      });
      const current = runner;
      const started = await Promise.race([
        waitFor(() => current.output().includes('Paygate is running'), {
          timeoutMs: 150_000,
          intervalMs: 250,
        }).then(() => true),
        current.exited.then(() => false),
      ]).catch(() => false);
      if (!started) throw new Error(`the dev runner did not start:\n${current.output().slice(-4000)}`);

      // What an hour in a browser leaves behind: the widget's live socket and keep-alive connections.
      sockets.push(await openWidgetSocket(8080 + offset));
      sockets.push(await openKeepAlive(8080 + offset));
      sockets.push(await openKeepAlive(8090 + offset));
      sockets.push(await openKeepAlive(routeTable.services.notifier.port + offset));

      const signalledAt = Date.now();
      current.child.kill(signal);
      const exitCode = await Promise.race([
        current.exited,
        new Promise<'still running'>((resolve) => setTimeout(() => resolve('still running'), STOP_WITHIN_MS)),
      ]);
      expect({ signal, exitCode }).toEqual({ signal, exitCode: 0 });
      await waitFor(async () => (await busyPorts(offset)).length === 0, {
        timeoutMs: Math.max(1000, STOP_WITHIN_MS - (Date.now() - signalledAt)),
        intervalMs: 200,
        message: `ports still bound after ${signal}`,
      });
      expect(Date.now() - signalledAt).toBeLessThan(STOP_WITHIN_MS);
    },
    240_000,
  );
});
