/**
 * Rate limits behind a proxy: the client address is the right-most X-Forwarded-For
 * hop that is not a trusted proxy (TRUSTED_PROXIES), so clients behind a real HTTP proxy get buckets of their
 * own, and an X-Forwarded-For sent by anyone else is ignored. Clients are told apart by the loopback address
 * their sockets bind (127.0.0.2, 127.0.0.3…); only the proxy's 127.0.0.1 is trusted.
 *
 *   npx jest --ci services/gateway-proxy/test/client-address.test.ts
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Harness, skillSnapshot, startHarness, startUpstream } from './harness';

jest.setTimeout(60_000);

const LIMIT = 3;

/** A plain forwarding proxy, as ingress-nginx or the dev edge: appends its peer's address to X-Forwarded-For. */
async function startForwardingProxy(target: string): Promise<{ url: string; close(): Promise<void> }> {
  const upstream = new URL(target);
  const server = http.createServer((req, res) => {
    const prior = req.headers['x-forwarded-for'];
    const forwardedFor = [prior, req.socket.remoteAddress].filter(Boolean).join(', ');
    const outgoing = http.request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, 'x-forwarded-for': forwardedFor },
        localAddress: '127.0.0.1',
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    outgoing.on('error', () => {
      res.writeHead(502);
      res.end();
    });
    req.pipe(outgoing);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A GET from a socket bound to `from` (fetch cannot choose its local address). */
function getFrom(from: string, url: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { localAddress: from, headers, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
  });
}

describe('gateway-proxy: the client address behind a trusted proxy (TRUSTED_PROXIES)', () => {
  let h: Harness;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  let proxy: Awaited<ReturnType<typeof startForwardingProxy>>;
  let viaProxy: string;
  let direct: string;

  beforeAll(async () => {
    h = await startHarness('gwclientip', {
      RATE_LIMIT_PER_MINUTE: String(LIMIT),
      TRUSTED_PROXIES: '127.0.0.1/32',
    });
    upstream = await startUpstream();
    await h.publishSkill(skillSnapshot({ name: 'counted', apiBaseUrl: `${upstream.url}/seller` }));
    proxy = await startForwardingProxy(h.gateway.url);
    viaProxy = `${proxy.url}/api/v1/skills/counted/data`;
    direct = `${h.gateway.url}/api/v1/skills/counted/data`;
    // Windows are whole minutes: start just after a boundary so no test straddles one.
    h.clock.set((Math.floor(Date.now() / 60_000) + 1) * 60_000 + 500);
  });
  afterAll(async () => {
    await proxy?.close();
    await upstream?.close();
    await h?.stop();
  });

  it(`two clients behind the proxy get a bucket each (${LIMIT} unpaid 402s a minute per client)`, async () => {
    const first: number[] = [];
    for (let i = 0; i <= LIMIT; i++) first.push(await getFrom('127.0.0.2', viaProxy));
    expect(first).toEqual([...Array(LIMIT).fill(402), 429]);
    // Another client behind the same proxy is not throttled by the first one.
    expect(await getFrom('127.0.0.3', viaProxy)).toBe(402);
    // A spoofed X-Forwarded-For through the proxy: the proxy appends the real peer, which is what counts.
    expect(await getFrom('127.0.0.2', viaProxy, { 'X-Forwarded-For': '203.0.113.7' })).toBe(429);
  });

  it('ignores X-Forwarded-For from a peer that is not a trusted proxy', async () => {
    const statuses: number[] = [];
    for (let i = 0; i <= LIMIT; i++) {
      // A new made-up address each time: believed, every call would land in a fresh bucket.
      statuses.push(await getFrom('127.0.0.4', direct, { 'X-Forwarded-For': `198.51.100.${i + 1}` }));
    }
    expect(statuses).toEqual([...Array(LIMIT).fill(402), 429]);
    // Nor can an untrusted peer spend another client's quota by naming it.
    for (let i = 0; i < 2; i++)
      expect(await getFrom('127.0.0.5', direct, { 'X-Forwarded-For': '127.0.0.3' })).toBe(402);
    expect(await getFrom('127.0.0.3', viaProxy)).toBe(402);
  });
});
