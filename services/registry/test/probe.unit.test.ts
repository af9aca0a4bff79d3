import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { sellerFetch } from '@paygate/net';
import { PASSING_HEAD_STATUSES, PASSING_HEAD_STATUSES_NOT_GET, probeEndpoint } from '../src/validation/probe';

/** Which HEAD answers count as "the endpoint responds" (docs/api.md, "Validation and health pings"), against a real server. */
describe('validation HEAD statuses', () => {
  let server: http.Server;
  let base: string;
  const sellers = sellerFetch({ publicOnly: false });

  beforeAll(async () => {
    // Answers HEAD /<status> with that status.
    server = http.createServer((req, res) => {
      const status = Number(req.url?.slice(1));
      if (status >= 300 && status < 400) res.setHeader('location', '/elsewhere');
      res.writeHead(status).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await sellers.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it.each([200, 204, 400, 401, 402, 403, 422])('HTTP %i passes', async (status) => {
    expect(await probeEndpoint(sellers, `${base}/${status}`, 2000)).toMatchObject({ ok: true });
  });

  it('HTTP 404 passes for a path with :param segments (probed as written: no such value, route there)', async () => {
    expect(await probeEndpoint(sellers, `${base}/404`, 2000, { pathHasParameters: true })).toMatchObject({
      ok: true,
    });
  });

  it.each([
    [301, 'a redirect (not followed: set apiBaseUrl and the path to where the endpoint is served)'],
    [307, 'a redirect (not followed: set apiBaseUrl and the path to where the endpoint is served)'],
    [404, 'nothing is served at this URL'],
    [410, 'nothing is served at this URL'],
    [405, 'the endpoint does not answer HEAD'],
    [429, 'not a status that shows the endpoint is served here'],
    [418, 'not a status that shows the endpoint is served here'],
    [500, "the seller's server failed"],
    [503, "the seller's server failed"],
  ])('HTTP %i fails: %s', async (status, why) => {
    expect(await probeEndpoint(sellers, `${base}/${status}`, 2000)).toMatchObject({
      ok: false,
      cause: `answered HTTP ${status}: ${why} (passing: ${PASSING_HEAD_STATUSES})`,
    });
  });

  // HEAD reaches GET handlers only: a POST, PUT, PATCH or DELETE route is there even when its HEAD gets 404 or 405.
  it.each([200, 301, 400, 404, 405, 410, 429])('HTTP %i passes for a POST endpoint', async (status) => {
    expect(await probeEndpoint(sellers, `${base}/${status}`, 2000, { method: 'POST' })).toMatchObject({
      ok: true,
    });
  });

  it.each([500, 502, 503])('HTTP %i fails for a POST endpoint', async (status) => {
    expect(await probeEndpoint(sellers, `${base}/${status}`, 2000, { method: 'DELETE' })).toMatchObject({
      ok: false,
      cause: `answered HTTP ${status}: the seller's server failed (passing: ${PASSING_HEAD_STATUSES_NOT_GET})`,
    });
  });
});
