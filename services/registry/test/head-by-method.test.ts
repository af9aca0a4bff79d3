/**
 * Validation's "each endpoint responds to a HEAD request", against a real express seller. Frameworks route HEAD to
 * GET handlers only, so a POST-only route answers HEAD with 404 (express) or 405: for an endpoint whose method is
 * not GET, any timely answer below 500 shows the seller's server is there, and the skill goes ACTIVE. For a GET
 * endpoint a 404 still means nothing is served at that path. A 5xx or a refused connection is never a response.
 * Each failure's statusReason names the endpoint (method and path) and why.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { signUpSeller, waitFor } from '@paygate/testing';
import { Wallet } from 'ethers';
import express from 'express';
import { api, type Harness, startHarness } from './helpers';

let h: Harness;
let seller: Awaited<ReturnType<typeof signUpSeller>>;
let server: Server;
let sellerUrl: string;
const heads: string[] = [];

beforeAll(async () => {
  h = await startHarness('reghead', { VALIDATION_TIMEOUT_MS: '3000' });
  seller = await signUpSeller(h.url, Wallet.createRandom());
  const app = express();
  app.use((req, _res, next) => {
    if (req.method === 'HEAD') heads.push(req.path);
    next();
  });
  // POST-only routes: express answers HEAD on them with 404.
  app.post('/orders', (_req, res) => res.status(201).json({ ok: true }));
  app.delete('/orders/:id', (_req, res) => res.status(204).end());
  app.get('/catalog', (_req, res) => res.json([]));
  // A seller whose server fails, whatever the method.
  app.all('/broken', (_req, res) => res.status(500).end());
  server = app.listen(0, '127.0.0.1');
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  sellerUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
  await h?.stop();
});

async function validated(name: string, endpoints: unknown[], apiBaseUrl = sellerUrl) {
  const created = await api(h.url, 'POST', '/api/v1/manage/skills', {
    token: seller.apiKey,
    body: {
      name,
      displayName: name,
      description: 'A skill whose endpoints are probed with HEAD.',
      apiBaseUrl,
      type: 'API',
      endpoints,
    },
  });
  expect(created.status).toBe(201);
  return waitFor(
    async () => {
      const s = (await api(h.url, 'GET', `/api/v1/manage/skills/${name}`, { token: seller.apiKey })).body;
      return s.status !== 'PENDING_VALIDATION' ? s : undefined;
    },
    { timeoutMs: 15_000, message: `${name} still pending` },
  );
}

describe('validation HEAD, by the endpoint method', () => {
  it('an express seller with POST-only and DELETE-only routes (HEAD answers 404) becomes ACTIVE', async () => {
    const skill = await validated('express-post-only', [
      { path: '/orders', method: 'POST', priceUsdc: '0.01' },
      { path: '/orders/:id', method: 'DELETE', priceUsdc: '0.01' },
      { path: '/catalog', method: 'GET', priceUsdc: '0.01' },
    ]);
    expect(skill).toMatchObject({ status: 'ACTIVE', statusReason: null });
    expect(heads).toEqual(expect.arrayContaining(['/orders', '/orders/:id', '/catalog']));
  });

  it('a GET endpoint whose HEAD answers 404 fails, the reason naming the endpoint and why', async () => {
    const skill = await validated('express-get-missing', [
      { path: '/orders', method: 'POST', priceUsdc: '0.01' },
      { path: '/nowhere', method: 'GET', priceUsdc: '0.01' },
    ]);
    expect(skill.status).toBe('VALIDATION_FAILED');
    expect(skill.statusReason).toMatch(
      /^endpoint GET \/nowhere: HEAD http:\/\/127\.0\.0\.1:\d+\/nowhere answered HTTP 404: nothing is served at this URL/,
    );
  });

  it('a POST endpoint whose server answers 500 fails: a 5xx is never a response', async () => {
    const skill = await validated('express-post-broken', [
      { path: '/broken', method: 'POST', priceUsdc: '0.01' },
    ]);
    expect(skill.status).toBe('VALIDATION_FAILED');
    expect(skill.statusReason).toMatch(
      /^endpoint POST \/broken: HEAD http:\/\/127\.0\.0\.1:\d+\/broken answered HTTP 500: the seller's server failed/,
    );
  });

  it('a POST endpoint on a port nobody listens on fails: a refused connection is never a response', async () => {
    const closed = express().listen(0, '127.0.0.1');
    await new Promise<void>((resolve) => closed.once('listening', () => resolve()));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const skill = await validated(
      'express-post-refused',
      [{ path: '/orders', method: 'POST', priceUsdc: '0.01' }],
      `http://127.0.0.1:${port}`,
    );
    expect(skill.status).toBe('VALIDATION_FAILED');
    expect(skill.statusReason).toMatch(/^endpoint POST \/orders: HEAD .* unreachable \(ECONNREFUSED\)/);
  });
});
