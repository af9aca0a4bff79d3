import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createGateway } from '@paygate/gateway-middleware';
import { encodeX402Header } from '@paygate/protocol';
import type { RunningSettlement } from '@paygate/settlement';
import { serveSellersForTests, signTransferAuthorization, testSigner, testWallets } from '@paygate/testing';
import express from 'express';
import { type Harness, skillSnapshot, startHarness, startUpstream } from './harness';
import { startRelayer } from './relayer';

jest.setTimeout(90_000);

const API_KEY = 'sk_test_subscription_tiers_0123456789';
const SELLER = {
  sellerId: 'seller-tiers',
  walletAddress: testWallets.seller.address,
  payoutAddress: testWallets.seller.address,
  publishableKey: 'pk_test_subscription_tiers_0123456789',
  apiKeyVersion: 1,
};

const CHEAP = 10_000n; // 0.01 USDC
const PREMIUM = 50_000_000n; // 50 USDC

/**
 * A subscription sells a cheap endpoint and a dear one: the cheap payment must never open the dear one, whatever
 * amount the buyer writes into its own header. Only the amount the chain says was transferred (the claim's
 * amount_micro) counts, on every path: the paid URL (PROXY and TICKET, from Postgres and from memory), the seller's
 * POST /api/verify, the middleware's subscription(), and a subscription paid with x402.
 */
describe('subscription tiers: a cheap payment never opens a dear endpoint', () => {
  let h: Harness;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  let settlement: RunningSettlement;
  let sellerServer: Server;
  let sellerUrl: string;
  let premiumHandled = 0;

  const tiered = (name: string, mode: 'PROXY' | 'TICKET') =>
    skillSnapshot({
      name,
      skillId: `skill-${name}`,
      sellerId: SELLER.sellerId,
      apiBaseUrl: `${upstream.url}/seller`,
      type: 'Subscription',
      mode,
      durationDays: 30,
      endpoints: [
        {
          endpointId: `ep-${name}-cheap`,
          path: '/cheap',
          method: 'GET',
          description: 'The cheap tier',
          price: '0.01',
          isHealthy: true,
          active: true,
        },
        {
          endpointId: `ep-${name}-premium`,
          path: '/premium',
          method: 'GET',
          description: 'The dear tier',
          price: '50',
          isHealthy: true,
          active: true,
        },
      ],
    });

  beforeAll(async () => {
    h = await startHarness('subtiers', { RATE_LIMIT_PER_MINUTE: '100000' });
    await serveSellersForTests(h.bus, { [API_KEY]: SELLER });
    upstream = await startUpstream();
    settlement = await startRelayer(h);
    await h.publishSkill(tiered('tiers', 'PROXY'));
    await h.publishSkill(tiered('tiers-tix', 'TICKET'));

    // The seller's own server: both tiers sold with the middleware's subscription(), verified by POST /api/verify.
    const gateway = createGateway({
      apiKey: API_KEY,
      apiBaseUrl: h.gateway.url,
      timeoutMs: 5000,
      x402: false,
    });
    const app = express();
    app.get('/cheap', gateway.subscription({ price: '0.01', durationDays: 30 }), (req, res) => {
      res.json({ tier: 'cheap', x402: req.x402 });
    });
    app.get('/premium', gateway.subscription({ price: '50', durationDays: 30 }), (req, res) => {
      premiumHandled += 1;
      res.json({ tier: 'premium', x402: req.x402 });
    });
    sellerServer = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    sellerUrl = `http://127.0.0.1:${(sellerServer.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    if (sellerServer) await new Promise((resolve) => sellerServer.close(resolve));
    await settlement?.stop();
    await upstream?.close();
    await h?.stop();
  });

  const skillUrl = (skill: string, path: string) => `${h.gateway.url}/api/v1/skills/${skill}${path}`;

  /** What presenting a proof answered: the status and the refusal's reason, if any. */
  async function present(url: string, header: string): Promise<{ status: number; reason?: string }> {
    const res = await fetch(url, { headers: { 'X-402-Payment': header } });
    const body = (await res.json().catch(() => ({}))) as { reason?: string };
    return { status: res.status, ...(body.reason ? { reason: body.reason } : {}) };
  }

  const insufficient = { status: 402, reason: 'insufficient_amount' };

  it.each([
    ['PROXY', 'tiers'],
    ['TICKET', 'tiers-tix'],
  ])(
    '%s: 0.01 paid for /cheap, /premium with "amount":"50" in the header is refused, from memory and from Postgres',
    async (_mode, skill) => {
      const txHash = await h.transfer('buyer', CHEAP);
      const cheap = await h.header({ txHash, resource: h.resource('GET', skill, '/cheap'), amount: CHEAP });
      expect(await present(skillUrl(skill, '/cheap'), cheap)).toEqual({ status: 200 });
      const seenBefore = upstream.requests.filter((r) => r.url.startsWith('/seller/premium')).length;

      const lying = await h.header({
        txHash,
        resource: h.resource('GET', skill, '/premium'),
        amount: PREMIUM,
      });
      const honest = await h.header({
        txHash,
        resource: h.resource('GET', skill, '/premium'),
        amount: CHEAP,
      });
      // The subscription's claim is in memory now (served just above): three tries, then the true amount.
      for (let i = 0; i < 3; i++)
        expect(await present(skillUrl(skill, '/premium'), lying)).toEqual(insufficient);
      expect(await present(skillUrl(skill, '/premium'), honest)).toEqual(insufficient);
      // The same from Postgres (another replica, or this one after its cache dropped the claim).
      h.gateway.state.payments.forgetCachedClaims();
      expect(await present(skillUrl(skill, '/premium'), lying)).toEqual(insufficient);
      expect(await present(skillUrl(skill, '/premium'), honest)).toEqual(insufficient);
      // The proof the cheap tier was paid with still opens the cheap tier.
      expect(await present(skillUrl(skill, '/cheap'), cheap)).toEqual({ status: 200 });
      expect(upstream.requests.filter((r) => r.url.startsWith('/seller/premium')).length).toBe(seenBefore);
    },
  );

  it('a subscription paid with x402 at /cheap opens neither /premium with the same authorization nor its transaction in a lying X-402-Payment', async () => {
    const signed = await signTransferAuthorization(testSigner('buyer', h.anvil.provider), {
      chainId: 31337,
      usdcAddress: h.usdcAddress,
      to: testWallets.escrow.address,
      valueMicro: CHEAP,
    });
    const payment = encodeX402Header({
      x402Version: 2,
      accepted: {
        scheme: 'exact',
        network: 'eip155:31337',
        amount: CHEAP.toString(),
        asset: h.usdcAddress,
        payTo: testWallets.escrow.address,
        maxTimeoutSeconds: 60,
        extra: { name: 'USD Coin', version: '2' },
      },
      payload: signed,
    });
    const paid = await fetch(skillUrl('tiers', '/cheap'), { headers: { 'PAYMENT-SIGNATURE': payment } });
    expect(paid.status).toBe(200);
    const txHash = paid.headers.get('x-402-receipt')!;
    expect(txHash).toMatch(/^0x[0-9a-f]{64}$/);

    const again = await fetch(skillUrl('tiers', '/premium'), { headers: { 'PAYMENT-SIGNATURE': payment } });
    expect(again.status).toBe(402);
    expect((await again.json()).reason).toBe('invalid_exact_evm_payload_authorization_value_mismatch');
    const lying = await h.header({
      txHash,
      resource: h.resource('GET', 'tiers', '/premium'),
      amount: PREMIUM,
    });
    expect(await present(skillUrl('tiers', '/premium'), lying)).toEqual(insufficient);
    h.gateway.state.payments.forgetCachedClaims();
    expect(await present(skillUrl('tiers', '/premium'), lying)).toEqual(insufficient);
  });

  /** The seller's POST /api/verify, as its middleware calls it. */
  async function verify(body: Record<string, unknown>) {
    const res = await fetch(`${h.gateway.url}/api/verify`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(200);
    return (await res.json()) as { valid: boolean; reason?: string; payment?: { reused: boolean } };
  }

  it('POST /api/verify: a 0.01 subscription is not valid for a 50 one, whatever amount the header says', async () => {
    const txHash = await h.transfer('buyer', CHEAP);
    const cheapResource = 'GET https://seller.example/cheap';
    const premiumResource = 'GET https://seller.example/premium';
    const sub = { type: 'subscription', durationDays: 30 };
    const first = await verify({
      ...sub,
      price: '0.01',
      resource: cheapResource,
      payment: await h.header({ txHash, resource: cheapResource, amount: CHEAP }),
    });
    expect(first).toMatchObject({ valid: true, payment: { reused: false } });

    const lying = await h.header({ txHash, resource: premiumResource, amount: PREMIUM });
    for (let i = 0; i < 3; i++) {
      expect(await verify({ ...sub, price: '50', resource: premiumResource, payment: lying })).toMatchObject({
        valid: false,
        reason: 'insufficient_amount',
      });
    }
    h.gateway.state.payments.forgetCachedClaims();
    expect(await verify({ ...sub, price: '50', resource: premiumResource, payment: lying })).toMatchObject({
      valid: false,
      reason: 'insufficient_amount',
    });
    // Still valid for what it paid for.
    expect(
      await verify({
        ...sub,
        price: '0.01',
        resource: cheapResource,
        payment: await h.header({ txHash, resource: cheapResource, amount: CHEAP }),
      }),
    ).toMatchObject({ valid: true, payment: { reused: true } });
  });

  it('POST /api/verify: a subscription pays for subscription access only, never for a product, a service or a call of the seller', async () => {
    const txHash = await h.transfer('buyer', 50_000n);
    const resource = 'GET https://seller.example/news';
    const sub = await verify({
      type: 'subscription',
      durationDays: 30,
      price: '0.05',
      resource,
      payment: await h.header({ txHash, resource, amount: 50_000n }),
    });
    expect(sub).toMatchObject({ valid: true, payment: { reused: false } });
    for (const type of ['product', 'service', 'payPerCall']) {
      const other = `POST https://seller.example/${type}`;
      expect(
        await verify({
          type,
          price: '0.01',
          resource: other,
          payment: await h.header({ txHash, resource: other, amount: 50_000n }),
        }),
      ).toMatchObject({ valid: false, reason: 'payment_already_used' });
    }
  });

  it("the middleware's subscription(): 0.01 paid at /cheap never runs /premium's handler", async () => {
    const txHash = await h.transfer('buyer', CHEAP);
    const cheap = await h.header({ txHash, resource: 'GET /cheap', amount: CHEAP });
    const served = await fetch(`${sellerUrl}/cheap`, { headers: { 'X-402-Payment': cheap } });
    expect(served.status).toBe(200);
    expect(await served.json()).toMatchObject({ tier: 'cheap', x402: { txHash, amount: '0.01' } });

    const lying = await h.header({ txHash, resource: 'GET /premium', amount: PREMIUM });
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${sellerUrl}/premium`, { headers: { 'X-402-Payment': lying } });
      expect(res.status).toBe(402);
      expect(await res.json()).toMatchObject({ error: 'Invalid payment', reason: 'insufficient_amount' });
    }
    expect(premiumHandled).toBe(0);
  });
});
