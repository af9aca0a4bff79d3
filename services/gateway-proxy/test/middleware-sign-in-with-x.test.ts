import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createGateway } from '@paygate/gateway-middleware';
import { decodePaymentRequired } from '@paygate/protocol';
import { serveSellersForTests, testWallets } from '@paygate/testing';
import { ExactEvmScheme } from '@x402/evm';
import {
  type CompleteSIWxInfo,
  createSIWxClientExtension,
  createSIWxPayload,
  encodeSIWxHeader,
  type SIWxExtension,
} from '@x402/extensions/sign-in-with-x';
import { wrapFetchWithPayment, x402Client } from '@x402/fetch';
import express from 'express';
import { privateKeyToAccount } from 'viem/accounts';
import { type Harness, startHarness } from './harness';

jest.setTimeout(90_000);

const DAY_MS = 24 * 60 * 60_000;
const sellerOf = (n: number) => ({
  apiKey: `sk_test_siwx_middleware_${n}_0123456789`,
  seller: {
    sellerId: `seller-siwx-${n}`,
    walletAddress: testWallets.seller.address,
    payoutAddress: testWallets.seller.address,
    publishableKey: `pk_test_siwx_middleware_${n}_0123456789`,
    apiKeyVersion: 1,
  },
});
const A = sellerOf(1);
const B = sellerOf(2);

/**
 * The seller middleware's subscription() with x402's sign-in-with-x: a buyer that paid a seller's subscription
 * once (X-402-Payment, verified by POST /api/verify) is let through by an unmodified `@x402/fetch` with the
 * extension's client hook, nothing paid; refused with a 402 and the reason: a wallet that did not pay, a message
 * for another origin, one used before, a subscription to another seller, after durationDays.
 */
describe("gateway-middleware subscription(): x402's sign-in-with-x", () => {
  let h: Harness;
  const servers: Server[] = [];
  let urlA: string;
  let urlB: string;
  const network = 'eip155:31337';
  const buyer = privateKeyToAccount(testWallets.buyer.privateKey as `0x${string}`);
  const stranger = privateKeyToAccount(testWallets.stranger.privateKey as `0x${string}`);
  let handled = 0;

  async function sellerServer(apiKey: string): Promise<string> {
    const gateway = createGateway({ apiKey, apiBaseUrl: h.gateway.url, timeoutMs: 5000 });
    const app = express();
    app.get('/news', gateway.subscription({ price: '0.05', durationDays: 30 }), (req, res) => {
      handled += 1;
      res.json({ news: 'fresh', x402: req.x402 });
    });
    const server = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    servers.push(server);
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  beforeAll(async () => {
    h = await startHarness('siwxmiddleware', { RATE_LIMIT_PER_MINUTE: '100000' });
    await serveSellersForTests(h.bus, { [A.apiKey]: A.seller, [B.apiKey]: B.seller });
    urlA = await sellerServer(A.apiKey);
    urlB = await sellerServer(B.apiKey);
  });

  afterAll(async () => {
    for (const server of servers) await new Promise((resolve) => server.close(resolve));
    await h?.stop();
  });

  function client(account = buyer) {
    const x402 = x402Client.fromConfig({ schemes: [{ network, client: new ExactEvmScheme(account) }] });
    x402.registerExtension(createSIWxClientExtension({ signers: [account] }));
    return wrapFetchWithPayment(fetch, x402);
  }

  async function challengeOf(target: string): Promise<CompleteSIWxInfo> {
    const res = await fetch(target);
    expect(res.status).toBe(402);
    const required = decodePaymentRequired(res.headers.get('payment-required')!) as any;
    expect(required.accepts).toEqual([]);
    const declared = required.extensions['sign-in-with-x'] as SIWxExtension;
    return { ...declared.info, chainId: declared.supportedChains[0]!.chainId, type: 'eip191' };
  }

  async function signedHeader(
    target: string,
    signer: Parameters<typeof createSIWxPayload>[1],
    edit: (info: CompleteSIWxInfo) => CompleteSIWxInfo = (info) => info,
    requestUrl = target,
  ) {
    return encodeSIWxHeader(await createSIWxPayload(edit(await challengeOf(target)), signer, requestUrl));
  }

  async function refusal(res: Response): Promise<string> {
    expect(res.status).toBe(402);
    expect(res.headers.get('payment-required')).toBeTruthy();
    const body = await res.json();
    expect(body.error).toBe('Invalid sign-in');
    return body.reason;
  }

  it("a subscription's 402 carries the sign-in-with-x challenge for the seller's own origin", async () => {
    const info = await challengeOf(`${urlA}/news`);
    expect(info).toMatchObject({ domain: new URL(urlA).host, uri: `${urlA}/news`, chainId: network });
  });

  it('paid once with X-402-Payment, the subscriber signs in with @x402/fetch and is let through, nothing paid', async () => {
    const txHash = await h.transfer('buyer', 50_000n);
    const paid = await fetch(`${urlA}/news`, {
      headers: { 'X-402-Payment': await h.header({ txHash, resource: 'GET /news', amount: 50_000n }) },
    });
    expect(paid.status).toBe(200);
    const before = handled;
    const res = await client()(`${urlA}/news`);
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body.x402).toMatchObject({ txHash, type: 'subscription', durationDays: 30 });
    expect(body.x402.payer.toLowerCase()).toBe(buyer.address.toLowerCase());
    expect(body.x402.expiresAt).toBeDefined();
    expect(handled).toBe(before + 1);
  });

  it('refuses a wallet that did not pay, and the subscriber at another seller', async () => {
    const strangerHeader = await signedHeader(`${urlA}/news`, stranger);
    expect(
      await refusal(await fetch(`${urlA}/news`, { headers: { 'SIGN-IN-WITH-X': strangerHeader } })),
    ).toBe('siwx_not_subscribed');
    const atB = await signedHeader(`${urlB}/news`, buyer);
    expect(await refusal(await fetch(`${urlB}/news`, { headers: { 'SIGN-IN-WITH-X': atB } }))).toBe(
      'siwx_not_subscribed',
    );
  });

  it("refuses a message for another origin (seller B's, presented to seller A) and one used before", async () => {
    const forB = await signedHeader(`${urlB}/news`, buyer);
    expect(await refusal(await fetch(`${urlA}/news`, { headers: { 'SIGN-IN-WITH-X': forB } }))).toBe(
      'invalid_siwx_domain_mismatch',
    );
    const header = await signedHeader(`${urlA}/news`, buyer);
    const first = await fetch(`${urlA}/news`, { headers: { 'SIGN-IN-WITH-X': header } });
    expect(first.status).toBe(200);
    await first.arrayBuffer();
    expect(await refusal(await fetch(`${urlA}/news`, { headers: { 'SIGN-IN-WITH-X': header } }))).toBe(
      'invalid_siwx_nonce',
    );
  });

  it('refuses after durationDays', async () => {
    h.clock.advance(31 * DAY_MS);
    try {
      const header = await signedHeader(`${urlA}/news`, buyer);
      expect(await refusal(await fetch(`${urlA}/news`, { headers: { 'SIGN-IN-WITH-X': header } }))).toBe(
        'subscription_expired',
      );
    } finally {
      h.clock.set(Date.now());
    }
  });
});
