import { generateKeyPairSync } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createServer, type Socket } from 'node:net';
import { createAgent } from '@paygate/agent-client';
import { type Harness, skillSnapshot, startHarness } from '@paygate/gateway-proxy/test/harness';
import { serveSellersForTests, testWallets } from '@paygate/testing';
import { Wallet } from 'ethers';
import express from 'express';
import { decodeJwt, decodeProtectedHeader, SignJWT } from 'jose';
import { createGateway } from '../src';

jest.setTimeout(60_000);

const API_KEY = 'sk_test_middleware_key_0123456789';
const SELLER = {
  sellerId: 'seller-mw',
  walletAddress: testWallets.seller.address,
  payoutAddress: testWallets.seller.address,
  publishableKey: 'pk_test_middleware_key_0123456789',
  apiKeyVersion: 1,
};

describe('@paygate/gateway-middleware against the real gateway-proxy', () => {
  let h: Harness;
  let server: Server;
  let sellerUrl: string;
  const seen: Array<Record<string, unknown> | undefined> = [];

  beforeAll(async () => {
    h = await startHarness('gwmw', { TICKET_TTL_SECONDS: '60' });
    await serveSellersForTests(h.bus, { [API_KEY]: SELLER });
    const gateway = createGateway({ apiKey: API_KEY, apiBaseUrl: h.gateway.url, timeoutMs: 3000 });
    const app = express();
    app.use(express.json());
    const done = (req: express.Request, res: express.Response) => {
      seen.push(req.x402 as unknown as Record<string, unknown>);
      res.json({ ok: true, x402: req.x402 });
    };
    app.get('/weather', gateway.payPerCall('0.05'), done);
    app.get(
      '/news',
      gateway.subscription({ price: '0.05', durationDays: 30, accessUrl: 'https://seller.example/news' }),
      done,
    );
    app.post('/shop', gateway.product({ price: '0.05', requiresShipping: true }), done);
    app.post('/consult', gateway.service({ price: '0.05' }), done);
    app.get('/tickets/data', gateway.ticket({ skill: 'tix', basePath: '/tickets' }), done);
    app.get('/tickets/other', gateway.ticket({ skill: 'tix', basePath: '/tickets' }), done);
    server = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    sellerUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    await h.publishSkill(
      skillSnapshot({
        name: 'tix',
        mode: 'TICKET',
        apiBaseUrl: `${sellerUrl}/tickets`,
        sellerId: SELLER.sellerId,
      }),
    );
  });
  afterAll(async () => {
    server?.closeAllConnections();
    await new Promise((r) => server?.close(r));
    await h?.stop();
  });

  it('answers 402 with the documented 402 body of each constructor', async () => {
    const common = {
      network: 'local',
      chainId: 31337,
      payTo: testWallets.escrow.address,
      asset: h.usdcAddress,
      confirmations: 1,
      header: 'X-402-Payment',
    };
    expect(await (await fetch(`${sellerUrl}/weather`)).json()).toEqual({
      price: '0.05',
      description: 'Pay 0.05 USDC per call',
      resource: 'GET /weather',
      type: 'payPerCall',
      ...common,
    });
    expect(await (await fetch(`${sellerUrl}/news`)).json()).toEqual({
      price: '0.05',
      description: '30 days of access for 0.05 USDC',
      durationDays: 30,
      accessUrl: 'https://seller.example/news',
      resource: 'GET /news',
      type: 'subscription',
      ...common,
    });
    const product = await fetch(`${sellerUrl}/shop`, { method: 'POST' });
    expect(product.status).toBe(402);
    expect(await product.json()).toMatchObject({
      price: '0.05',
      requiresShipping: true,
      network: 'local',
      type: 'product',
    });
    expect(await (await fetch(`${sellerUrl}/consult`, { method: 'POST' })).json()).toMatchObject({
      price: '0.05',
      description: 'Service for 0.05 USDC',
      network: 'local',
      type: 'service',
    });
  });

  it("verifies through POST /api/verify, sets req.x402, credits the key's seller once, refuses reuse", async () => {
    const txHash = await h.transfer('buyer', 50_000n);
    const header = await h.header({ txHash, resource: 'GET /weather' });
    const res = await fetch(`${sellerUrl}/weather`, { headers: { 'X-402-Payment': header } });
    expect(res.status).toBe(200);
    expect((await res.json()).x402).toEqual({
      txHash,
      amount: '0.05',
      payer: testWallets.buyer.address,
      network: 'local',
    });
    const again = await fetch(`${sellerUrl}/weather`, { headers: { Payment: header } });
    expect(again.status).toBe(402);
    expect(await again.json()).toMatchObject({ error: 'Invalid payment', reason: 'payment_already_used' });
    // Booked once by the ledger (the in-memory one here) with the gateway's claim.
    const events = h.ledgerPayments(txHash).map((data) => ({ data }));
    expect(events).toHaveLength(1);
    expect(events[0]!.data).toMatchObject({
      sellerId: 'seller-mw',
      skillId: null,
      source: 'x402',
      holdPeriodHours: 0,
    });
  });

  it('sets the type-specific req.x402 fields for subscription, product and service', async () => {
    const sub = await h.transfer('buyer', 50_000n);
    const subHeader = await h.header({ txHash: sub, resource: 'GET /news' });
    for (let i = 0; i < 2; i++) {
      const res = await fetch(`${sellerUrl}/news`, { headers: { 'X-402-Payment': subHeader } });
      expect(res.status).toBe(200);
      expect((await res.json()).x402).toMatchObject({ txHash: sub, type: 'subscription', durationDays: 30 });
    }
    const shop = await h.transfer('buyer', 50_000n);
    const shopRes = await fetch(`${sellerUrl}/shop`, {
      method: 'POST',
      headers: { 'X-402-Payment': await h.header({ txHash: shop, resource: 'POST /shop' }) },
    });
    expect((await shopRes.json()).x402).toMatchObject({
      txHash: shop,
      type: 'product',
      requiresShipping: true,
    });
    const consult = await h.transfer('buyer', 50_000n);
    const consultRes = await fetch(`${sellerUrl}/consult`, {
      method: 'POST',
      headers: { 'X-402-Payment': await h.header({ txHash: consult, resource: 'POST /consult' }) },
    });
    expect((await consultRes.json()).x402).toMatchObject({
      txHash: consult,
      type: 'service',
      amount: '0.05',
    });
    const holds = h
      .ledgerPayments()
      .filter((d) => [sub, shop, consult].includes(d.txHash))
      .map((d) => d.holdPeriodHours)
      .sort();
    expect(holds).toEqual([24, 48, 72]);
  });

  it('answers HTTP 500 to a proof it cannot verify when Paygate is unreachable, and still 402 to a call without one', async () => {
    // A Paygate that accepts connections and never answers.
    const silentSockets = new Set<Socket>();
    const silent = createServer((socket) => {
      silentSockets.add(socket);
    });
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const silentPort = (silent.address() as AddressInfo).port;
    const dead = createGateway({
      apiKey: API_KEY,
      apiBaseUrl: `http://127.0.0.1:${silentPort}`,
      timeoutMs: 300,
    });
    const app = express();
    app.get('/x', dead.payPerCall('0.01'), (_req, res) => res.json({ ok: true }));
    const s = await new Promise<Server>((resolve) => {
      const x = app.listen(0, '127.0.0.1', () => resolve(x));
    });
    const port = (s.address() as AddressInfo).port;
    const started = Date.now();
    const res = await fetch(`http://127.0.0.1:${port}/x`, { headers: { 'X-402-Payment': 'e30=' } });
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({ error: { code: 'paygate_unavailable', message: expect.any(String) } });
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    expect(Date.now() - started).toBeLessThan(5000);
    // A cold start: nothing known about the escrow yet, Paygate silent. Still a 402 with the price, at once.
    const noProofStarted = Date.now();
    const noProof = await fetch(`http://127.0.0.1:${port}/x`);
    expect(noProof.status).toBe(402);
    expect(Date.now() - noProofStarted).toBeLessThan(5000);
    expect(await noProof.json()).toMatchObject({
      price: '0.01',
      type: 'payPerCall',
      header: 'X-402-Payment',
    });
    expect(noProof.headers.get('payment-required')).toBeNull();
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
    // The silent server still holds the connections the gateway gave up on: end them too, or they outlive the suite.
    for (const socket of silentSockets) socket.destroy();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  });

  it('TICKET mode: the agent pays, gets a ticket, calls the seller, who verifies it once', async () => {
    const agent = createAgent({
      wallet: new Wallet(testWallets.buyer.privateKey, h.anvil.provider),
      maxPricePerCall: '0.10',
    });
    const res = await agent.fetch(`${h.gateway.url}/api/v1/skills/tix/data`);
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body.x402).toMatchObject({
      payer: testWallets.buyer.address,
      amount: '0.05',
      txHash: agent.payments[0]!.txHash,
    });
    // Replay of the same single-use ticket is refused.
    const ticketAnswer = await fetch(`${h.gateway.url}/api/v1/skills/tix/data`, {
      headers: { 'X-402-Payment': agent.payments[0]!.header },
    });
    expect(ticketAnswer.status).toBe(402); // the payment itself is spent
    const jwks = await (await fetch(`${h.gateway.url}/.well-known/jwks.json`)).json();
    expect(jwks.keys[0]).toMatchObject({ kty: 'EC', crv: 'P-256', alg: 'ES256', use: 'sig' });
    expect(jwks.keys[0].kid).toBeTruthy();
  });

  it('TICKET mode: refuses replays, other paths, expiry, alg none, HS256 and foreign keys', async () => {
    const txHash = await h.transfer('buyer', 50_000n);
    const header = await h.header({ txHash, resource: h.resource('GET', 'tix', '/data') });
    const answer = await fetch(`${h.gateway.url}/api/v1/skills/tix/data`, {
      headers: { 'X-402-Payment': header },
    });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('x-402-mode')).toBe('TICKET');
    const { ticket, url, expiresAt } = await answer.json();
    expect(url).toBe(`${sellerUrl}/tickets/data`);
    expect(new Date(expiresAt).getTime()).toBeGreaterThan(Date.now());
    const call = (path: string, t: string) =>
      fetch(`${sellerUrl}${path}`, { headers: { 'X-402-Ticket': t } });

    expect((await call('/tickets/other', ticket)).status).toBe(403); // wrong path, not consumed
    expect((await call('/tickets/data', ticket)).status).toBe(200);
    const replay = await call('/tickets/data', ticket);
    expect(replay.status).toBe(401);
    expect(await replay.json()).toEqual({
      error: { code: 'ticket_already_used', message: 'this single-use ticket was already accepted' },
    });

    const claims = decodeJwt(ticket);
    const { kid } = decodeProtectedHeader(ticket);
    const fresh = { ...claims, jti: 'forged-1', exp: Math.floor(Date.now() / 1000) + 60 };
    const none = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT', kid })).toString('base64url')}.${Buffer.from(JSON.stringify(fresh)).toString('base64url')}.`;
    expect(await (await call('/tickets/data', none)).json()).toMatchObject({
      error: { code: 'wrong_algorithm' },
    });
    const jwk = jwks(await (await fetch(`${h.gateway.url}/.well-known/jwks.json`)).json());
    const hs = await new SignJWT(fresh)
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT', kid })
      .sign(new TextEncoder().encode(jwk));
    expect(await (await call('/tickets/data', hs)).json()).toMatchObject({
      error: { code: 'wrong_algorithm' },
    });
    const foreign = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
    const forged = await new SignJWT({ ...fresh, jti: 'forged-2' })
      .setProtectedHeader({ alg: 'ES256', typ: 'JWT', kid })
      .sign(foreign);
    expect(await (await call('/tickets/data', forged)).json()).toMatchObject({
      error: { code: 'invalid_ticket' },
    });
    const otherAudience = await new SignJWT({ ...fresh, jti: 'forged-3', aud: 'other' })
      .setProtectedHeader({ alg: 'ES256', typ: 'JWT', kid: 'nope' })
      .sign(foreign);
    expect((await call('/tickets/data', otherAudience)).status).toBe(401);
    expect(await (await fetch(`${sellerUrl}/tickets/data`)).json()).toMatchObject({
      error: 'Ticket required',
      paymentUrl: `${h.gateway.url}/api/v1/skills/tix/data`,
    });

    // A ticket issued in the past has expired.
    const txOld = await h.transfer('buyer', 50_000n);
    h.clock.advance(-120_000);
    const oldAnswer = await fetch(`${h.gateway.url}/api/v1/skills/tix/data`, {
      headers: {
        'X-402-Payment': await h.header({ txHash: txOld, resource: h.resource('GET', 'tix', '/data') }),
      },
    });
    h.clock.advance(120_000);
    const expired = await call('/tickets/data', (await oldAnswer.json()).ticket);
    expect(await expired.json()).toMatchObject({ error: { code: 'ticket_expired' } });
  });
});

/** The published public key as PEM text: what an HS256 forgery would use as its HMAC secret. */
function jwks(doc: { keys: Array<Record<string, string>> }): string {
  const { createPublicKey } = require('node:crypto') as typeof import('node:crypto');
  return createPublicKey({ key: doc.keys[0] as never, format: 'jwk' })
    .export({ format: 'pem', type: 'spki' })
    .toString();
}
