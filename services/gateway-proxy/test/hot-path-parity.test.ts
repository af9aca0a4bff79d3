import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createSkillHandler } from '../src/routes/skills';
import { type Harness, skillSnapshot, startHarness, startUpstream } from './harness';

jest.setTimeout(90_000);

/**
 * The paid-call route has two transports: the cached-subscription hot path (synchronous, no promise) and the
 * full asynchronous path. Every case here is answered by the gateway as it runs (hot path first) and by a
 * handler on the same state with the hot path off; status, body and the headers a buyer reads must match.
 */
const COMPARED_HEADERS = [
  'content-type',
  'x-request-id',
  'x-402-receipt',
  'x-402-retry-until',
  'allow',
  'retry-after',
  'payment-required',
  'ratelimit-limit',
  'access-control-allow-origin',
  'x-seller',
];

interface Answer {
  status: number;
  headers: Record<string, string | null>;
  body: string;
}

describe('gateway-proxy: hot path and full path answer alike', () => {
  let h: Harness;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  let fullPathServer: http.Server;
  let fullPathUrl: string;
  let hotPathServed = 0;

  beforeAll(async () => {
    h = await startHarness('gwparity', { RATE_LIMIT_PER_MINUTE: '1000', RETRY_WINDOW_SECONDS: '600' });
    upstream = await startUpstream();
    const endpoints = skillSnapshot({ name: 'x', apiBaseUrl: '' }).endpoints;
    const flaky = {
      endpointId: 'ep-news-flaky',
      path: '/flaky',
      method: 'GET' as const,
      description: 'Flaky',
      price: '0.05',
      isHealthy: true,
      active: true,
    };
    await h.publishSkill(
      skillSnapshot({
        name: 'news',
        apiBaseUrl: `${upstream.url}/seller`,
        type: 'Subscription',
        durationDays: 30,
        endpoints: [...endpoints, flaky],
      }),
    );
    await h.publishSkill(skillSnapshot({ name: 'weather', apiBaseUrl: `${upstream.url}/seller` }));
    const state = h.gateway.state;
    // The hot path forwards with forwardThen (a callback), the full path with forward (a promise).
    const forwardThen = state.forwardThen;
    state.forwardThen = (...args) => {
      hotPathServed++;
      forwardThen(...args);
    };
    fullPathServer = http.createServer(createSkillHandler(state, { cachedPath: false }));
    await new Promise<void>((resolve) => fullPathServer.listen(0, '127.0.0.1', resolve));
    fullPathUrl = `http://127.0.0.1:${(fullPathServer.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    fullPathServer?.closeAllConnections();
    await new Promise((resolve) => fullPathServer?.close(resolve));
    await upstream?.close();
    await h?.close();
  });

  async function call(base: string, path: string, init: RequestInit, id: string): Promise<Answer> {
    const res = await fetch(`${base}/api/v1/skills${path}`, {
      ...init,
      headers: { ...(init.headers as Record<string, string>), 'x-request-id': id },
    });
    const headers: Record<string, string | null> = {};
    for (const name of COMPARED_HEADERS) headers[name] = res.headers.get(name);
    return { status: res.status, headers, body: await res.text() };
  }

  /**
   * Answers the case through the full path, then through the running gateway (hot path first), and returns
   * both. The hot path decides the rate limit only from a count synced within the last second (the full path's
   * call just synced it); on a slow machine that second may pass, so a case meant for the hot path is asked
   * again (`hotPath`, up to 3 times, `before` re-arming it) until the hot path answered it.
   */
  async function bothPaths(path: string, init: RequestInit = {}, hotPath = false, before = () => {}) {
    for (let attempt = 1; ; attempt++) {
      before();
      const id = `parity-${Math.random().toString(36).slice(2)}`;
      const full = await call(fullPathUrl, path, init, id);
      const hotBefore = hotPathServed;
      const hot = await call(h.gateway.url, path, init, id);
      const viaHotPath = hotPathServed > hotBefore;
      if (viaHotPath === hotPath || attempt === 3) return { hot, full, viaHotPath };
    }
  }

  it('answers every case alike through both paths', async () => {
    const resource = h.resource('GET', 'news', '/data');
    const txHash = await h.transfer('buyer', 50_000n);
    const paid = await h.header({ txHash, resource });
    // The first presentation claims the transfer (and caches the subscription claim).
    const first = await fetch(`${h.gateway.url}/api/v1/skills/news/data`, {
      headers: { 'X-402-Payment': paid },
    });
    expect(first.status).toBe(200);
    await first.arrayBuffer();

    const cases: Array<{
      name: string;
      path: string;
      init?: RequestInit;
      status: number;
      hotPath: boolean;
      reason?: string;
    }> = [
      { name: 'a subscriber repeats a call', path: '/news/data', status: 200, hotPath: true },
      { name: 'with a query', path: '/news/data?city=Oslo&n=2', status: 200, hotPath: true },
      {
        name: 'another endpoint costing more',
        path: '/news/echo',
        init: { method: 'POST', body: 'x' },
        status: 402,
        hotPath: false,
        reason: 'insufficient_amount',
      },
      {
        name: 'another skill',
        path: '/weather/data',
        status: 402,
        hotPath: false,
        reason: 'payment_already_used',
      },
      { name: 'no payment', path: '/news/data', status: 402, hotPath: false },
      { name: 'unknown skill', path: '/nope/data', status: 404, hotPath: false },
      { name: 'unknown path', path: '/news/nothing', status: 404, hotPath: false },
      { name: 'wrong method', path: '/news/data', init: { method: 'DELETE' }, status: 405, hotPath: false },
      { name: 'a price ping', path: '/news/data', init: { method: 'HEAD' }, status: 200, hotPath: false },
    ];
    const withHeader = (path: string, header: string, init: RequestInit = {}) => ({
      path,
      init: { ...init, headers: { 'X-402-Payment': header } },
    });
    for (const c of cases) {
      const request =
        c.name === 'no payment' ? { path: c.path, init: c.init ?? {} } : withHeader(c.path, paid, c.init);
      const { hot, full, viaHotPath } = await bothPaths(request.path, request.init, c.hotPath);
      expect({ case: c.name, ...hot }).toEqual({ case: c.name, ...full });
      expect({ case: c.name, status: hot.status, viaHotPath }).toEqual({
        case: c.name,
        status: c.status,
        viaHotPath: c.hotPath,
      });
      if (c.reason) expect(JSON.parse(hot.body)).toMatchObject({ reason: c.reason });
    }

    // Someone else's signature, a stranger presenting the payer's transfer, a wrong network, a bad header.
    const refusals: Array<{ name: string; header: string; status: number; reason?: string }> = [
      {
        name: 'signed by someone else',
        header: await h.header({ txHash, resource, signer: 'stranger' }),
        status: 402,
        reason: 'invalid_signature',
      },
      {
        name: 'a stranger presents the transfer',
        header: await h.header({ txHash, resource, from: 'stranger' }),
        status: 402,
        reason: 'payment_already_used',
      },
      {
        name: 'another network',
        header: await h.header({ txHash, resource, network: 'base' }),
        status: 402,
        reason: 'wrong_network',
      },
      { name: 'a malformed header', header: '%%%', status: 400 },
    ];
    for (const c of refusals) {
      const { hot, full, viaHotPath } = await bothPaths('/news/data', {
        headers: { 'X-402-Payment': c.header },
      });
      expect({ case: c.name, ...hot }).toEqual({ case: c.name, ...full });
      expect({ case: c.name, status: hot.status, viaHotPath }).toEqual({
        case: c.name,
        status: c.status,
        viaHotPath: false,
      });
      if (c.reason) expect(JSON.parse(hot.body)).toMatchObject({ reason: c.reason });
    }

    // The seller fails: the subscriber gets the seller's 5xx with the receipt, on both paths.
    const flakyTx = await h.transfer('buyer', 50_000n);
    const flakyPaid = await h.header({ txHash: flakyTx, resource: h.resource('GET', 'news', '/flaky') });
    const claimed = await fetch(`${h.gateway.url}/api/v1/skills/news/flaky`, {
      headers: { 'X-402-Payment': flakyPaid },
    });
    expect(claimed.status).toBe(200);
    await claimed.arrayBuffer();
    const failed = await bothPaths('/news/flaky', { headers: { 'X-402-Payment': flakyPaid } }, true, () => {
      upstream.failuresLeft.count = 2;
    });
    expect(failed.hot).toEqual(failed.full);
    expect({ status: failed.hot.status, viaHotPath: failed.viaHotPath }).toEqual({
      status: 503,
      viaHotPath: true,
    });
    expect(failed.hot.headers['x-402-receipt']).toBe(flakyTx);

    // Expired: refused alike (the hot path declines, the claim is still cached).
    h.clock.advance(31 * 24 * 60 * 60 * 1000);
    try {
      const expired = await bothPaths('/news/data', { headers: { 'X-402-Payment': paid } });
      expect(expired.hot).toEqual(expired.full);
      expect(expired.viaHotPath).toBe(false);
      expect(JSON.parse(expired.hot.body)).toMatchObject({ reason: 'subscription_expired' });
    } finally {
      h.clock.advance(-31 * 24 * 60 * 60 * 1000);
    }
  });
});
