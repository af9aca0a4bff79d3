import { generateKeyPairSync } from 'node:crypto';
import { encodePaymentHeader } from '@paygate/protocol';
import { ConfigError } from '@paygate/runtime';
import { servedApiOperations, serveSellersForTests, testWallets } from '@paygate/testing';
import { Wallet } from 'ethers';
import { decodeJwt, decodeProtectedHeader, importJWK, jwtVerify } from 'jose';
import { loadConfig, startGatewayProxy } from '../src';
import { type Harness, skillSnapshot, startHarness, startUpstream } from './harness';

jest.setTimeout(60_000);

const API_KEY = 'sk_test_verify_key_000000000000';
/** A seller of its own for the per-seller limit: its counts are shared by every replica of this test's gateway. */
const FLOOD_KEY = 'sk_test_verify_flood_00000000000';

describe('gateway-proxy: ticket keys, /api/verify, config', () => {
  let h: Harness;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;

  beforeAll(async () => {
    h = await startHarness('gwkeys');
    upstream = await startUpstream();
    await serveSellersForTests(h.bus, {
      [API_KEY]: {
        sellerId: 'seller-v',
        walletAddress: testWallets.seller.address,
        payoutAddress: testWallets.seller.address,
        publishableKey: 'pk_test_verify_key_000000000000',
        apiKeyVersion: 1,
      },
      [FLOOD_KEY]: {
        sellerId: 'seller-flood',
        walletAddress: testWallets.seller.address,
        payoutAddress: testWallets.seller.address,
        publishableKey: 'pk_test_verify_flood_00000000000',
        apiKeyVersion: 1,
      },
    });
    await h.publishSkill(skillSnapshot({ name: 'tk', mode: 'TICKET', apiBaseUrl: `${upstream.url}/seller` }));
  });
  afterAll(async () => {
    await upstream?.close();
    await h?.stop();
  });

  it('fails loudly on bad configuration', () => {
    expect(() => loadConfig({ USDC_ADDRESS: h.usdcAddress })).toThrow(ConfigError);
    expect(() => loadConfig({ ESCROW_ADDRESS: testWallets.escrow.address })).toThrow(/USDC_ADDRESS/);
    expect(() =>
      loadConfig({
        ESCROW_ADDRESS: testWallets.escrow.address,
        USDC_ADDRESS: h.usdcAddress,
        CONFIRMATIONS: '0',
      }),
    ).toThrow(/CONFIRMATIONS/);
    const base = loadConfig({ ESCROW_ADDRESS: testWallets.escrow.address, CHAIN_NETWORK: 'base' });
    expect(base).toMatchObject({
      chainId: 8453,
      confirmations: 3,
      usdcAddress: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
    });
  });

  it('signs tickets with one stored key shared by replicas, and keeps old keys in the JWKS after rotation', async () => {
    const jwks = async (url: string) =>
      (await (await fetch(`${url}/.well-known/jwks.json`)).json()).keys as Array<{ kid: string }>;
    const first = await jwks(h.gateway.url);
    expect(first).toHaveLength(1);
    // A second replica without TICKET_SIGNING_KEY signs with the same stored key.
    const replica = await startGatewayProxy(
      loadConfig(h.env.envFor('gateway-proxy', h.gatewayEnv), h.clock.now),
    );
    expect(replica.state.keys.signingKey().kid).toBe(first[0]!.kid);
    await replica.stop();

    const txHash = await h.transfer('buyer', 50_000n);
    const header = await h.header({ txHash, resource: h.resource('GET', 'tk', '/data') });
    const answer = await (
      await fetch(`${h.gateway.url}/api/v1/skills/tk/data`, { headers: { 'X-402-Payment': header } })
    ).json();
    const oldTicket = answer.ticket as string;
    const decoded = { header: decodeProtectedHeader(oldTicket), payload: decodeJwt(oldTicket) };
    expect(decoded.header).toMatchObject({ alg: 'ES256', kid: first[0]!.kid });
    expect(decoded.payload).toMatchObject({
      iss: 'http://paygate.test',
      sub: testWallets.buyer.address,
      aud: 'tk',
      method: 'GET',
      path: '/data',
      kind: 'payPerCall',
      txHash,
    });
    expect((decoded.payload as { jti: string }).jti).toBeTruthy();

    // Rotation: a replica configured with a new key signs with it; the JWKS serves both.
    const pem = generateKeyPairSync('ec', { namedCurve: 'P-256' })
      .privateKey.export({ format: 'pem', type: 'pkcs8' })
      .toString();
    const rotated = await startGatewayProxy(
      loadConfig(h.env.envFor('gateway-proxy', { ...h.gatewayEnv, TICKET_SIGNING_KEY: pem }), h.clock.now),
    );
    try {
      const keys = await jwks(rotated.url);
      expect(keys).toHaveLength(2);
      expect(rotated.state.keys.signingKey().kid).not.toBe(first[0]!.kid);
      const oldKey = keys.find((k) => k.kid === first[0]!.kid)!;
      await expect(
        jwtVerify(oldTicket, await importJWK(oldKey as never, 'ES256'), { algorithms: ['ES256'] }),
      ).resolves.toMatchObject({ protectedHeader: { alg: 'ES256', kid: oldKey.kid } });
    } finally {
      await rotated.stop();
    }
  });

  it('stores ticket signing keys sealed, never as plaintext PEM', async () => {
    const db = h.gateway.ctx.db as import('kysely').Kysely<any>;
    const rows = await db.selectFrom('ticket_keys').selectAll().execute();
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) {
      expect(Object.keys(row).sort()).toEqual(['created_at', 'kid', 'private_key_sealed', 'public_jwk']);
      expect(row.private_key_sealed).toMatch(/^v1\./);
      expect(row.private_key_sealed).not.toContain('PRIVATE KEY');
      // No part is a key's DER in base64 (which starts MIG). Not "contains MIG": random ciphertext held those
      // three letters in one clean-clone run.
      expect(row.private_key_sealed.split('.').filter((part: string) => part.startsWith('MIG'))).toEqual([]);
    }
    // Another TICKET_KEY_ENCRYPTION_KEY cannot open the stored keys: the gateway refuses to start.
    await expect(
      startGatewayProxy(
        loadConfig(
          h.env.envFor('gateway-proxy', {
            ...h.gatewayEnv,
            TICKET_KEY_ENCRYPTION_KEY: 'another-key-0123456789abcdef0123',
          }),
          h.clock.now,
        ),
      ),
    ).rejects.toThrow(/TICKET_KEY_ENCRYPTION_KEY/);
  });

  it('POST /api/verify: 401 without a key, 400 naming the field, invalid with a reason, valid once', async () => {
    const post = (body: unknown, key: string | null = API_KEY) =>
      fetch(`${h.gateway.url}/api/verify`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
        body: JSON.stringify(body),
      });
    expect((await post({}, null)).status).toBe(401);
    const bad = await post({ payment: 'x', price: 'abc', type: 'payPerCall', resource: 'GET /x' });
    expect(bad.status).toBe(400);
    expect((await bad.json()).error).toMatchObject({
      field: 'price',
      rule: 'must be a decimal USDC amount with at most 6 decimals, such as "0.05"',
    });
    // Money is a decimal string on the wire: a JSON number is refused by name on both verify routes, never read.
    const numberRule = 'must be a decimal USDC amount as a JSON string, such as "0.05", not a number';
    const asNumber = await post({ payment: 'x', price: 0.05, type: 'payPerCall', resource: 'GET /x' });
    expect(asNumber.status).toBe(400);
    expect((await asNumber.json()).error).toMatchObject({
      code: 'invalid_request',
      field: 'price',
      rule: numberRule,
    });
    const signInAsNumber = await fetch(`${h.gateway.url}/api/verify/sign-in`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
      body: JSON.stringify({
        signIn: 'x',
        origin: 'https://seller.example',
        price: 0.05,
        durationDays: 30,
        resource: 'GET /x',
      }),
    });
    expect(signInAsNumber.status).toBe(400);
    expect((await signInAsNumber.json()).error).toMatchObject({ field: 'price', rule: numberRule });
    const noDays = await post({ payment: 'x', price: '1', type: 'subscription', resource: 'GET /x' });
    expect((await noDays.json()).error).toMatchObject({ field: 'durationDays' });
    const malformed = await post({ payment: '!!', price: '0.05', type: 'payPerCall', resource: 'GET /x' });
    expect(await malformed.json()).toMatchObject({
      valid: false,
      reason: 'malformed_payment',
      message: 'payment header must be Base64',
    });

    const txHash = await h.transfer('buyer', 50_000n);
    const payment = await h.header({ txHash, resource: 'GET /x' });
    const tooDear = await post({ payment, price: '0.06', type: 'payPerCall', resource: 'GET /x' });
    expect(await tooDear.json()).toMatchObject({ valid: false, reason: 'insufficient_amount' });
    const valid = await post({ payment, price: '0.05', type: 'payPerCall', resource: 'GET /x' });
    expect(await valid.json()).toEqual({
      valid: true,
      payment: {
        txHash,
        amount: '0.05',
        payer: testWallets.buyer.address,
        network: 'local',
        type: 'payPerCall',
        reused: false,
      },
    });
    const again = await post({ payment, price: '0.05', type: 'payPerCall', resource: 'GET /x' });
    expect(await again.json()).toMatchObject({
      valid: false,
      reason: 'payment_already_used',
      claimedBy: 'verify',
    });
    const params = await (await fetch(`${h.gateway.url}/api/verify`)).json();
    expect(params).toMatchObject({
      network: 'local',
      chainId: 31337,
      payTo: testWallets.escrow.address,
      asset: h.usdcAddress,
    });
    const openapi = await (await fetch(`${h.gateway.url}/api/v1/openapi/gateway.json`)).json();
    expect(openapi.openapi).toBe('3.1.0');
    // Routes declare themselves: the document holds exactly the express routes (its own route among them), plus
    // the paid skill URLs (a declared route served on the bare request, ahead of express).
    const documented = Object.entries(openapi.paths).flatMap(([path, item]) =>
      Object.keys(item as object)
        .filter((key) => ['get', 'post', 'put', 'patch', 'delete'].includes(key))
        .map((method) => `${method} ${path}`),
    );
    const served = servedApiOperations(h.gateway.app);
    expect(documented.filter((op) => !op.includes('/api/v1/skills/')).sort()).toEqual(served.sort());
    expect(documented).toContain('get /api/v1/skills/{skillName}/{path}');
    expect(served).toEqual(
      expect.arrayContaining([
        'post /api/verify',
        'post /api/v1/x402/settle',
        'get /api/v1/openapi/gateway.json',
      ]),
    );
  });

  it('POST /api/verify: a seller is limited per minute whatever wallet each proof names', async () => {
    // Each proof names another wallet (the caller's word) and an unknown transaction, which costs chain reads.
    const replica = await startGatewayProxy(
      loadConfig(
        h.env.envFor('gateway-proxy', { ...h.gatewayEnv, VERIFY_PER_SELLER_PER_MINUTE: '5' }),
        h.clock.now,
      ),
    );
    try {
      const statuses: number[] = [];
      let refusal: unknown;
      for (let i = 0; i < 8; i++) {
        const payment = encodePaymentHeader({
          txHash: `0x${(i + 1).toString(16).padStart(64, '0')}`,
          amount: '0.05',
          token: h.usdcAddress,
          network: 'local',
          from: Wallet.createRandom().address,
          to: testWallets.escrow.address,
          signature: `0x${'11'.repeat(65)}`,
        });
        const response = await fetch(`${replica.url}/api/verify`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${FLOOD_KEY}` },
          body: JSON.stringify({ payment, price: '0.05', type: 'payPerCall', resource: 'GET /x' }),
        });
        statuses.push(response.status);
        if (response.status === 429) refusal = await response.json();
      }
      expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
      expect(refusal).toMatchObject({
        error: { code: 'rate_limited', message: expect.stringContaining('per minute per seller') },
      });
    } finally {
      await replica.stop();
    }
  });
});
