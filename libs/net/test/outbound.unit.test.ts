import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type HostResolver, type OutboundPolicy, sellerFetch } from '../src';

/** DNS for the test: names under rebind.test are this machine, mixed.test has a public and a private address. */
const dns: HostResolver = async (host) => {
  if (host.endsWith('.rebind.test')) return ['127.0.0.1'];
  if (host === 'mixed.test') return ['93.184.216.34', '10.0.0.7'];
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
};

describe('connections to sellers', () => {
  let server: http.Server;
  let port: number;
  const hits: string[] = [];

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      hits.push(`${req.method} ${req.url}`);
      res.end('ok');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  /** What a fetch through the policy's dispatcher gives: the status, or the refusal's message. */
  async function viaFetch(policy: OutboundPolicy, url: string): Promise<number | string> {
    const sellers = sellerFetch(policy);
    try {
      const response = await sellers.fetch(url, { signal: AbortSignal.timeout(2000) });
      await response.text();
      return response.status;
    } catch (error) {
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      return `${cause?.code}: ${cause?.message}`;
    } finally {
      await sellers.close();
    }
  }

  it('in production, refuses at connect time a name that resolves to loopback', async () => {
    const call = viaFetch;
    const before = hits.length;
    const production = { publicOnly: true, resolve: dns };
    expect(await call(production, `http://api.rebind.test:${port}/a`)).toBe(
      'ERR_FORBIDDEN_ADDRESS: refused to connect to api.rebind.test: it resolves to 127.0.0.1, a loopback, private, link-local or reserved address (production rule, checked at connect time)',
    );
    // One private address among public ones is enough to refuse (the registration rule).
    expect(await call(production, `http://mixed.test:${port}/b`)).toMatch(
      /^ERR_FORBIDDEN_ADDRESS: refused to connect to mixed\.test: it resolves to 10\.0\.0\.7/,
    );
    // IP literals are never looked up: they are checked before connecting.
    expect(await call(production, `http://127.0.0.1:${port}/c`)).toMatch(
      /^ERR_FORBIDDEN_ADDRESS: refused to connect to 127\.0\.0\.1: a loopback/,
    );
    expect(await call(production, `http://[::ffff:127.0.0.1]:${port}/d`)).toMatch(
      /^ERR_FORBIDDEN_ADDRESS: refused to connect to ::ffff:7f00:1/,
    );
    // The system resolver is the default one: localhost is refused too.
    expect(await call({ publicOnly: true }, `http://localhost:${port}/e`)).toMatch(
      /^ERR_FORBIDDEN_ADDRESS: refused to connect to localhost: it resolves to (127\.0\.0\.1|::1)/,
    );
    expect(hits.length).toBe(before);

    // In development the same names connect, through the same resolver.
    expect(await call({ publicOnly: false, resolve: dns }, `http://api.rebind.test:${port}/dev`)).toBe(200);
    expect(await call({ publicOnly: false }, `http://127.0.0.1:${port}/dev`)).toBe(200);
    expect(hits.slice(before)).toEqual(['GET /dev', 'GET /dev']);
  });
});
