import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createServer } from 'node:net';
import { startEdge } from '../dev/edge';

/** A port nothing listens on: one the OS handed out and that was closed again. */
async function closedPort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

describe('the dev edge answers its own errors with the services envelope', () => {
  let edge: Server;
  let url: string;

  beforeAll(async () => {
    const dead = `http://127.0.0.1:${await closedPort()}`;
    edge = await startEdge({ port: 0, upstreams: { registry: dead, 'gateway-proxy': dead } });
    url = `http://127.0.0.1:${(edge.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    edge.closeAllConnections();
    await new Promise((resolve) => edge.close(resolve));
  });

  it('404 route_not_found for a path no service serves; 502 upstream_unavailable when the service is away', async () => {
    const none = await fetch(`${url}/nowhere`);
    expect(none.status).toBe(404);
    expect(await none.json()).toEqual({
      error: { code: 'route_not_found', message: 'no service serves /nowhere' },
    });
    const away = await fetch(`${url}/api/v1/skills`);
    expect(away.status).toBe(502);
    expect(await away.json()).toEqual({
      error: { code: 'upstream_unavailable', message: 'the service for this path is not reachable' },
    });
  });
});
