import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { HostResolver } from '@paygate/net';
import type { RunningService } from '@paygate/runtime';
import { type ServiceHarness, startServiceHarness, TestClock } from '@paygate/testing';
import { loadConfig, type RegistryDatabase, startRegistry } from '../src';

export interface Harness extends ServiceHarness<RunningService<RegistryDatabase>> {
  registry: RunningService<RegistryDatabase>;
}

export const PUBLIC_BASE_URL = 'http://paygate.test:8080';

/**
 * A registry on real Postgres and NATS (its own schema and streams). Its clock ticks with real time (sessions and
 * nonces age as the suite runs) and is moved by advance.
 */
export async function startHarness(
  label: string,
  extra: Record<string, string> = {},
  options: { resolveHost?: HostResolver } = {},
): Promise<Harness> {
  const harness = await startServiceHarness(
    label,
    ({ env, clock }) =>
      startRegistry(
        loadConfig(
          env.envFor('registry', { PUBLIC_BASE_URL, VALIDATION_INTERVAL_MS: '200', ...extra }),
          clock.now,
        ),
        options,
      ),
    { clock: new TestClock(Date.now(), { ticking: true }) },
  );
  return { ...harness, registry: harness.service };
}

/** A stand-in seller API: answers every request with `status` (changeable), after `delayMs`. */
export async function startSellerApi(): Promise<{
  url: string;
  status: number;
  delayMs: number;
  hits: string[];
  close(): Promise<void>;
}> {
  const state = { status: 200, delayMs: 0, hits: [] as string[] };
  const server: Server = createServer((req, res) => {
    state.hits.push(`${req.method} ${req.url}`);
    setTimeout(() => {
      res.statusCode = state.status;
      res.end();
    }, state.delayMs);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return Object.assign(state, {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
}

export async function api(
  base: string,
  method: string,
  path: string,
  options: { token?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: any; text: string; headers: Headers }> {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: {
      ...(options.body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
      ...options.headers,
    },
    body:
      options.body === undefined
        ? undefined
        : typeof options.body === 'string'
          ? options.body
          : JSON.stringify(options.body),
  });
  const text = await response.text();
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: response.status, body, text, headers: response.headers };
}
