import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApp, errorHandler } from '@paygate/http';
import { SellerAuth } from '@paygate/seller-auth';
import { signUpSeller, waitFor } from '@paygate/testing';
import { Wallet } from 'ethers';
import { api, type Harness, startHarness } from './helpers';

let h: Harness;
let server: Server;
let auth: SellerAuth;
let otherUrl: string;

beforeAll(async () => {
  h = await startHarness('regauth');
  // Another service: a tiny express app guarded by the shared middleware, resolving keys over NATS.
  auth = new SellerAuth(await h.env.bus(), { cacheTtlMs: 60_000 });
  const app = createApp({ logger: h.env.logger });
  app.get('/whoami', auth.middleware(), (req, res) => {
    res.json(req.seller);
  });
  app.use(errorHandler(h.env.logger));
  server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  otherUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  auth?.close();
  await new Promise((r) => server?.close(r));
  await h?.stop();
});

describe('seller authentication in any service (registry RPC + SellerAuth middleware)', () => {
  it('resolves a key to the seller; after a rotation the old key works on for the overlap, and a revoking rotation refuses it everywhere as soon as it has answered', async () => {
    const seller = await signUpSeller(h.url, Wallet.createRandom());
    const ok = await api(otherUrl, 'GET', '/whoami', { token: seller.apiKey });
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({
      sellerId: seller.sellerId,
      walletAddress: seller.walletAddress,
      payoutAddress: seller.walletAddress,
      publishableKey: seller.publishableKey,
      apiKeyVersion: 1,
    });
    // Cached now (TTL 60 s): only the seller.updated event can make the rotation visible in seconds.
    expect((await api(otherUrl, 'GET', '/whoami', { token: seller.apiKey })).status).toBe(200);

    // A plain rotation: the old key keeps working (KEY_ROTATION_OVERLAP) here and at every other service.
    const overlapping = await api(h.url, 'POST', '/api/v1/account/api-key/rotate', {
      token: seller.sessionToken,
    });
    expect(overlapping.status).toBe(200);
    await waitFor(
      async () => (await api(otherUrl, 'GET', '/whoami', { token: seller.apiKey })).body?.apiKeyVersion === 2,
      { timeoutMs: 5000, message: 'the old key is not resolved to the rotated account' },
    );
    expect((await api(otherUrl, 'GET', '/whoami', { token: overlapping.body.apiKey })).status).toBe(200);

    // A leaked key: revoked at once, with the key still in its overlap.
    const rotated = await api(h.url, 'POST', '/api/v1/account/api-key/rotate', {
      token: seller.sessionToken,
      body: { revokeImmediately: true },
    });
    expect(rotated.status).toBe(200);
    // Refused as soon as the rotation has answered: the registry answers only once seller.updated is out.
    const refused = await api(otherUrl, 'GET', '/whoami', { token: seller.apiKey });
    expect(refused.body.error.code).toBe('unknown_api_key');
    expect((await api(otherUrl, 'GET', '/whoami', { token: overlapping.body.apiKey })).status).toBe(401);
    const fresh = await api(otherUrl, 'GET', '/whoami', { token: rotated.body.apiKey });
    expect(fresh.status).toBe(200);
    expect(fresh.body.apiKeyVersion).toBe(3);
  });

  it('resolves a dashboard session token to its seller in any service, and refuses a forged or expired one', async () => {
    const seller = await signUpSeller(h.url, Wallet.createRandom());
    const ok = await api(otherUrl, 'GET', '/whoami', { token: seller.sessionToken });
    expect([ok.status, ok.body.sellerId]).toEqual([200, seller.sellerId]);
    // Same header and payload, another signature: the registry checks the HS256 signature, not the shape.
    const [header, payload] = seller.sessionToken.split('.');
    const forged = `${header}.${payload}.${'A'.repeat(43)}`;
    const refused = await api(otherUrl, 'GET', '/whoami', { token: forged });
    expect([refused.status, refused.body.error.code]).toEqual([401, 'unknown_api_key']);
    const expiredPayload = Buffer.from(
      JSON.stringify({ ...JSON.parse(Buffer.from(payload!, 'base64url').toString()), exp: 1 }),
    ).toString('base64url');
    const expired = await api(otherUrl, 'GET', '/whoami', {
      token: `${header}.${expiredPayload}.${'B'.repeat(43)}`,
    });
    expect(expired.status).toBe(401);
  });

  it('answers 401 with a clear error for a missing, malformed or unknown key, never 500', async () => {
    const missing = await api(otherUrl, 'GET', '/whoami');
    expect([missing.status, missing.body.error.code]).toEqual([401, 'missing_api_key']);
    const malformed = await api(otherUrl, 'GET', '/whoami', { token: 'sk_short' });
    expect([malformed.status, malformed.body.error.code]).toEqual([401, 'invalid_api_key']);
    const unknown = await api(otherUrl, 'GET', '/whoami', { token: `sk_test_${'x'.repeat(32)}` });
    expect([unknown.status, unknown.body.error.code]).toEqual([401, 'unknown_api_key']);
  });
});
