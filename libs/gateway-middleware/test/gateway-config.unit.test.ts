import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { createGateway, type GatewayConfig, resolvePaygateUrl } from '../src';

const API_KEY = 'sk_test_config_key_0123456789';
const ESCROW = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';
const SEPOLIA_USDC = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';

const decode = (header: string | null) => JSON.parse(Buffer.from(header ?? '', 'base64').toString('utf8'));

describe('the Paygate base URL', () => {
  it('is required outside development, with a start-up error naming the option', () => {
    const production = { NODE_ENV: 'production' };
    expect(() => resolvePaygateUrl(undefined, 'createGateway: apiBaseUrl', production)).toThrow(
      /^createGateway: apiBaseUrl is required: Paygate's address, e\.g\. https:\/\/paygate\.example \(or set PAYGATE_BASE_URL; http:\/\/localhost:8080 is assumed only when NODE_ENV=development\)$/,
    );
    expect(() => resolvePaygateUrl(undefined, 'x', {})).toThrow('x is required');
    expect(() => resolvePaygateUrl('', 'x', { NODE_ENV: 'development' })).toThrow('x is required');
    expect(() => resolvePaygateUrl('paygate.example', 'x', {})).toThrow(
      'x must be an http(s) URL, got "paygate.example"',
    );
    expect(() => resolvePaygateUrl('ftp://paygate.example', 'x', {})).toThrow('x must be an http(s) URL');
  });

  it('comes from the option, else PAYGATE_BASE_URL, else the dev edge in development only', () => {
    expect(resolvePaygateUrl('https://paygate.example/', 'x', { PAYGATE_BASE_URL: 'https://other' })).toBe(
      'https://paygate.example',
    );
    expect(resolvePaygateUrl(undefined, 'x', { PAYGATE_BASE_URL: 'https://env.example' })).toBe(
      'https://env.example',
    );
    expect(resolvePaygateUrl(undefined, 'x', { NODE_ENV: 'development' })).toBe('http://localhost:8080');
  });

  it('createGateway refuses to start without one', () => {
    const saved = { base: process.env.PAYGATE_BASE_URL, env: process.env.NODE_ENV };
    delete process.env.PAYGATE_BASE_URL;
    process.env.NODE_ENV = 'production';
    try {
      expect(() => createGateway({ apiKey: API_KEY })).toThrow('createGateway: apiBaseUrl is required');
    } finally {
      if (saved.base !== undefined) process.env.PAYGATE_BASE_URL = saved.base;
      process.env.NODE_ENV = saved.env;
    }
  });
});

describe('402 answers from a pinned configuration (no round trip to Paygate)', () => {
  let server: Server;
  let url: string;
  const calls: string[] = [];

  beforeAll(async () => {
    const config: GatewayConfig = {
      apiKey: API_KEY,
      apiBaseUrl: 'http://127.0.0.1:9', // nothing listens there; no call may be made anyway
      network: 'base-sepolia',
      escrowAddress: ESCROW.toLowerCase(),
      publicUrl: 'https://api.seller.example',
      fetch: async (input) => {
        calls.push(String(input));
        throw new Error('Paygate is down');
      },
    };
    const gateway = createGateway(config);
    const app = express();
    const ok = (_req: express.Request, res: express.Response) => res.json({ ok: true });
    app.get('/forecast', gateway.payPerCall('0.05'), ok);
    app.get('/cheap', gateway.payPerCall('0.001'), ok);
    app.get('/news', gateway.subscription({ price: '5', durationDays: 30 }), ok);
    server = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((r) => server?.close(r));
  });

  it("offers Paygate's body and x402's PAYMENT-REQUIRED for the network preset", async () => {
    const res = await fetch(`${url}/forecast?city=oslo`);
    expect(res.status).toBe(402);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const body = await res.json();
    expect(body).toMatchObject({
      price: '0.05',
      network: 'base-sepolia',
      chainId: 84532,
      payTo: ESCROW,
      asset: SEPOLIA_USDC,
      confirmations: 3,
      resource: 'GET https://api.seller.example/forecast',
      type: 'payPerCall',
      header: 'X-402-Payment',
      // v1 (x402-fetch 1.x) reads the body on Base networks
      x402Version: 1,
      accepts: [{ scheme: 'exact', network: 'base-sepolia', maxAmountRequired: '50000', payTo: ESCROW }],
    });
    expect(decode(res.headers.get('payment-required'))).toEqual({
      x402Version: 2,
      error: 'payment required',
      resource: {
        url: 'https://api.seller.example/forecast?city=oslo',
        description: 'Pay 0.05 USDC per call',
        mimeType: 'application/json',
      },
      accepts: [
        {
          scheme: 'exact',
          network: 'eip155:84532',
          amount: '50000',
          asset: SEPOLIA_USDC,
          payTo: ESCROW,
          maxTimeoutSeconds: 300,
          extra: { name: 'USDC', version: '2' },
        },
      ],
    });
    expect(calls).toEqual([]);
  });

  it('offers x402 only where Paygate settles it: pay-per-call of at least 0.01 USDC', async () => {
    const cheap = await fetch(`${url}/cheap`);
    expect(cheap.status).toBe(402);
    expect(cheap.headers.get('payment-required')).toBeNull();
    expect(await cheap.json()).toMatchObject({ payTo: ESCROW, network: 'base-sepolia' });
    // A subscription is paid with X-402-Payment: its PAYMENT-REQUIRED offers nothing to pay, only x402's
    // sign-in-with-x challenge for a subscriber's wallet.
    const news = await fetch(`${url}/news`);
    expect(news.status).toBe(402);
    expect(await news.json()).toMatchObject({ payTo: ESCROW, network: 'base-sepolia' });
    const required = decode(news.headers.get('payment-required')) as any;
    expect(required.accepts).toEqual([]);
    expect(required.extensions['sign-in-with-x']).toMatchObject({
      info: { domain: 'api.seller.example', uri: 'https://api.seller.example/news', version: '1' },
      supportedChains: [{ chainId: 'eip155:84532', type: 'eip191' }],
    });
    const paid = await fetch(`${url}/news`, { headers: { 'PAYMENT-SIGNATURE': 'eyJ4NDAyVmVyc2lvbiI6Mn0=' } });
    expect(paid.status).toBe(402);
    expect(await paid.json()).toMatchObject({ error: 'Invalid payment', reason: 'x402_not_offered' });
    expect(calls).toEqual([]);
  });

  it('refuses an undecodable PAYMENT-SIGNATURE with x402 reason invalid_payload, before asking Paygate', async () => {
    for (const header of ['not base64!', Buffer.from('[1]').toString('base64'), 'eyJ4NDAyVmVyc2lvbiI6MX0=']) {
      const res = await fetch(`${url}/forecast`, { headers: { 'PAYMENT-SIGNATURE': header } });
      expect(res.status).toBe(402);
      expect(await res.json()).toMatchObject({ error: 'Invalid payment', reason: 'invalid_payload' });
      expect(decode(res.headers.get('payment-required'))).toMatchObject({ error: 'invalid_payload' });
    }
    expect(calls).toEqual([]);
  });

  it('refuses half a pin and bad addresses at start-up', () => {
    expect(() => createGateway({ apiKey: API_KEY, apiBaseUrl: 'http://x', network: 'base' })).toThrow(
      'createGateway: network and escrowAddress go together',
    );
    expect(() =>
      createGateway({ apiKey: API_KEY, apiBaseUrl: 'http://x', network: 'base', escrowAddress: '0x12' }),
    ).toThrow('createGateway: escrowAddress must be a 20-byte hex address');
    expect(() =>
      createGateway({ apiKey: API_KEY, apiBaseUrl: 'http://x', network: 'local', escrowAddress: ESCROW }),
    ).toThrow('createGateway: usdcAddress is required on network "local"');
    expect(() =>
      createGateway({ apiKey: API_KEY, apiBaseUrl: 'http://x', x402: { maxTimeoutSeconds: 5 } }),
    ).toThrow('createGateway: x402.maxTimeoutSeconds must be an integer from 10 to 3600');
  });
});

describe('answers other than a 402 carry the error envelope { error: { code, message } }', () => {
  let server: Server;
  let url: string;

  beforeAll(async () => {
    const pinned = { apiKey: API_KEY, apiBaseUrl: 'http://paygate.test', network: 'base-sepolia' as const };
    const limited = createGateway({
      ...pinned,
      escrowAddress: ESCROW,
      fetch: async () => new Response('{}', { status: 429, headers: { 'retry-after': '7' } }),
    });
    const down = createGateway({
      ...pinned,
      escrowAddress: ESCROW,
      fetch: async () => {
        throw new Error('Paygate is down');
      },
    });
    const app = express();
    const ok = (_req: express.Request, res: express.Response) => res.json({ ok: true });
    app.get('/limited', limited.payPerCall('0.05'), ok);
    app.get('/limited-news', limited.subscription({ price: '5', durationDays: 30 }), ok);
    app.get('/down', down.payPerCall('0.05'), ok);
    server = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((r) => server?.close(r));
  });

  it('Paygate limiting the seller: 429 rate_limited with Paygate Retry-After, for a proof and for a sign-in', async () => {
    const proof = await fetch(`${url}/limited`, { headers: { 'X-402-Payment': 'e30=' } });
    const signIn = await fetch(`${url}/limited-news`, { headers: { 'SIGN-IN-WITH-X': 'e30=' } });
    for (const res of [proof, signIn]) {
      expect(res.status).toBe(429);
      expect(res.headers.get('retry-after')).toBe('7');
      expect(await res.json()).toEqual({
        error: { code: 'rate_limited', message: expect.any(String), retryAfterSeconds: 7 },
      });
    }
  });

  it('Paygate unreachable with a proof presented: 500 paygate_unavailable', async () => {
    const res = await fetch(`${url}/down`, { headers: { 'X-402-Payment': 'e30=' } });
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({
      error: { code: 'paygate_unavailable', message: 'Paygate could not be reached; retry shortly' },
    });
  });
});
