/**
 * Relayer gas burnt for free, and the facilitator used without bounds: with the real
 * registry (seller keys), settlement's relayer and anvil, each abuse is refused and no gas is spent on it.
 *
 *   npx jest --ci services/gateway-proxy/test/x402-abuse.test.ts
 */
import { loadConfig as loadRegistryConfig, startRegistry } from '@paygate/registry';
import type { StartedService } from '@paygate/runtime';
import type { RunningSettlement } from '@paygate/settlement';
import { signTransferAuthorization, signUpSeller, testWallets } from '@paygate/testing';
import { HTTPFacilitatorClient } from '@x402/core/server';
import { Wallet } from 'ethers';
import { type Harness, relayStraightToToken, skillSnapshot, startHarness, startUpstream } from './harness';
import { startRelayer } from './relayer';

jest.setTimeout(120_000);

const NETWORK = 'eip155:31337';
const PER_MINUTE = 10;
const PER_PAYER_PER_DAY = 2;
const PER_SELLER_PER_DAY = 3;
const DISCOVERY_PER_MINUTE = 3;

describe('x402 abuse: minimum amount, validity window, used authorizations, relayer budgets, facilitator limits', () => {
  let h: Harness;
  let registry: StartedService;
  let settlement: RunningSettlement;

  beforeAll(async () => {
    h = await startHarness('x402abuse', {
      RATE_LIMIT_PER_MINUTE: '100000',
      X402_FACILITATOR_PER_MINUTE: String(PER_MINUTE),
      RELAYER_DAILY_PER_PAYER: String(PER_PAYER_PER_DAY),
      RELAYER_DAILY_PER_SELLER: String(PER_SELLER_PER_DAY),
      DISCOVERY_PER_MINUTE: String(DISCOVERY_PER_MINUTE),
      // A copy of a payment being settled waits this (and RELAYER_TIMEOUT_MS) for it, then answers 503.
      X402_INCLUSION_WAIT_MS: '2000',
    });
    registry = await startRegistry(
      loadRegistryConfig(h.env.envFor('registry', { PUBLIC_BASE_URL: 'http://paygate.test' })),
    );
    settlement = await startRelayer(h);
  });

  afterAll(async () => {
    await settlement?.stop();
    await registry?.stop();
    await h?.stop();
  });

  const relayerNonce = () => h.anvil.provider.getTransactionCount(testWallets.relayer.address, 'latest');

  /** A seller of its own (its own facilitator bucket and relayer budget): a fresh wallet signs in. */
  const newSellerKey = async () =>
    (await signUpSeller(registry.url, Wallet.createRandom().privateKey)).apiKey;

  /** A payer of its own with 1 USDC (no ETH: the relayer pays the gas). */
  async function newPayer(): Promise<Wallet> {
    const payer = new Wallet(Wallet.createRandom().privateKey);
    await h.transfer('buyer', 1_000_000n, { to: payer.address });
    return payer;
  }

  /** A facilitator request for a well-signed authorization of `valueMicro` into escrow. */
  async function facilitatorBody(
    payer: Wallet,
    valueMicro: bigint,
    overrides: { validBefore?: number; maxTimeoutSeconds?: number } = {},
  ) {
    const signed = await signTransferAuthorization(payer, {
      chainId: 31337,
      usdcAddress: h.usdcAddress,
      to: testWallets.escrow.address,
      valueMicro,
      validBefore: overrides.validBefore,
    });
    const paymentRequirements = {
      scheme: 'exact',
      network: NETWORK,
      asset: h.usdcAddress,
      payTo: testWallets.escrow.address,
      amount: valueMicro.toString(),
      maxTimeoutSeconds: overrides.maxTimeoutSeconds ?? 60,
      extra: { name: 'USD Coin', version: '2' },
    };
    return {
      signed,
      body: {
        x402Version: 2,
        paymentPayload: { x402Version: 2, accepted: paymentRequirements, payload: signed },
        paymentRequirements,
      },
    };
  }

  const call = (path: 'verify' | 'settle' | 'supported', key: string, body?: unknown) =>
    fetch(`${h.gateway.url}/api/v1/x402/${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });

  it('refuses authorizations below X402_MIN_AMOUNT (0.01 USDC by default) without spending gas', async () => {
    const key = await newSellerKey();
    const payer = await newPayer();
    const nonceBefore = await relayerNonce();
    // Dust settles: each would otherwise cost the relayer a transaction.
    for (let i = 0; i < 5; i++) {
      const { body } = await facilitatorBody(payer, 1n);
      const settle = await call('settle', key, body);
      expect(settle.status).toBe(200);
      expect(await settle.json()).toMatchObject({
        success: false,
        errorReason: 'invalid_exact_evm_authorization_value',
        errorMessage: expect.stringContaining('at least 10000'),
        transaction: '',
      });
    }
    const { body } = await facilitatorBody(payer, 9_999n);
    expect(await (await call('verify', key, body)).json()).toMatchObject({
      isValid: false,
      invalidReason: 'invalid_exact_evm_authorization_value',
    });
    expect(await relayerNonce()).toBe(nonceBefore);
  });

  it('refuses a validBefore beyond now + maxTimeoutSeconds (the year 2100), on /verify and /settle', async () => {
    const key = await newSellerKey();
    const payer = await newPayer();
    const nonceBefore = await relayerNonce();
    const year2100 = Math.floor(Date.UTC(2100, 0, 1) / 1000);
    const { body } = await facilitatorBody(payer, 10_000n, { validBefore: year2100 });
    expect(await (await call('verify', key, body)).json()).toMatchObject({
      isValid: false,
      invalidReason: 'invalid_exact_evm_payload_authorization_valid_before',
    });
    expect(await (await call('settle', key, body)).json()).toMatchObject({
      success: false,
      errorReason: 'invalid_exact_evm_payload_authorization_valid_before',
    });
    // The seller's own maxTimeoutSeconds is honoured up to X402_FACILITATOR_MAX_TIMEOUT_SECONDS (3600), no further.
    const now = Math.floor(Date.now() / 1000);
    const fiveMinutes = await facilitatorBody(payer, 10_000n, {
      validBefore: now + 300,
      maxTimeoutSeconds: 300,
    });
    expect(await (await call('verify', key, fiveMinutes.body)).json()).toMatchObject({ isValid: true });
    const twoHours = await facilitatorBody(payer, 10_000n, {
      validBefore: now + 7200,
      maxTimeoutSeconds: 7200,
    });
    expect(await (await call('verify', key, twoHours.body)).json()).toMatchObject({
      isValid: false,
      invalidReason: 'invalid_exact_evm_payload_authorization_valid_before',
    });
    expect(await relayerNonce()).toBe(nonceBefore);
  });

  it('/verify refuses an authorization already settled here or used on chain by someone else', async () => {
    const key = await newSellerKey();
    const payer = await newPayer();
    const settledHere = await facilitatorBody(payer, 10_000n);
    expect(await (await call('verify', key, settledHere.body)).json()).toMatchObject({ isValid: true });
    expect(await (await call('settle', key, settledHere.body)).json()).toMatchObject({ success: true });
    // A replay: an @x402/express seller would run its handler again on isValid: true.
    expect(await (await call('verify', key, settledHere.body)).json()).toMatchObject({
      isValid: false,
      invalidReason: 'invalid_exact_evm_nonce_already_used',
    });

    // Submitted straight to the token by a stranger (anyone may relay a signed authorization).
    const usedElsewhere = await facilitatorBody(payer, 10_000n);
    await relayStraightToToken(h, usedElsewhere.signed.authorization, usedElsewhere.signed.signature);
    expect(await (await call('verify', key, usedElsewhere.body)).json()).toMatchObject({
      isValid: false,
      invalidReason: 'invalid_exact_evm_nonce_already_used',
    });
  });

  it(`relays at most ${PER_PAYER_PER_DAY} payments per payer per UTC day: then 429 with Retry-After, no gas`, async () => {
    const key = await newSellerKey();
    const payer = await newPayer();
    for (let i = 0; i < PER_PAYER_PER_DAY; i++) {
      const { body } = await facilitatorBody(payer, 10_000n);
      expect(await (await call('settle', key, body)).json()).toMatchObject({ success: true });
    }
    const nonceBefore = await relayerNonce();
    const { body } = await facilitatorBody(payer, 10_000n);
    const over = await call('settle', key, body);
    expect(over.status).toBe(429);
    const retryAfter = Number(over.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(86_400);
    expect(await over.json()).toMatchObject({
      success: false,
      errorReason: 'relayer_daily_limit',
      transaction: '',
      error: {
        code: 'relayer_daily_limit',
        message: expect.stringContaining(
          `at most ${PER_PAYER_PER_DAY} x402 payments per day per payer wallet`,
        ),
        retryAfterSeconds: retryAfter,
      },
    });
    expect(await relayerNonce()).toBe(nonceBefore);
    // Nothing was kept of the refused authorization: it is not "used".
    expect(await (await call('verify', key, body)).json()).toMatchObject({ isValid: true });
  });

  it(`relays at most ${PER_SELLER_PER_DAY} payments per seller per UTC day, whoever pays`, async () => {
    const key = await newSellerKey();
    for (let i = 0; i < PER_SELLER_PER_DAY; i++) {
      const { body } = await facilitatorBody(await newPayer(), 10_000n);
      expect(await (await call('settle', key, body)).json()).toMatchObject({ success: true });
    }
    const nonceBefore = await relayerNonce();
    const { body } = await facilitatorBody(await newPayer(), 10_000n);
    const over = await call('settle', key, body);
    expect(over.status).toBe(429);
    expect((await over.json()).error.message).toContain(
      `at most ${PER_SELLER_PER_DAY} x402 payments per day per seller`,
    );
    expect(await relayerNonce()).toBe(nonceBefore);
    // The next UTC day starts afresh.
    const nowMs = h.clock.now().getTime();
    h.clock.advance(86_400_000 - (nowMs % 86_400_000) + 1000);
    try {
      const tomorrow = await facilitatorBody(await newPayer(), 10_000n, {
        validBefore: Math.floor(h.clock.now().getTime() / 1000) + 60,
      });
      expect(await (await call('settle', key, tomorrow.body)).json()).toMatchObject({ success: true });
    } finally {
      h.clock.set(Date.now());
    }
  });

  /**
   * Runs `calls` with the gateway's clock just past the start of a minute, so that a burst shares one window of
   * the per-minute limits (on a slow host, one crossed into the next window and its last call was allowed).
   */
  async function justPastMinuteStart(calls: () => Promise<void>): Promise<void> {
    const nowMs = h.clock.now().getTime();
    h.clock.advance(60_000 - (nowMs % 60_000) + 500);
    try {
      await calls();
    } finally {
      h.clock.set(Date.now());
    }
  }

  it(`rate-limits the facilitator to ${PER_MINUTE} calls a minute per seller key (429, Retry-After, error body)`, async () => {
    const key = await newSellerKey();
    await justPastMinuteStart(async () => {
      for (let i = 0; i < PER_MINUTE; i++) {
        const res = await call('supported', key);
        expect(res.status).toBe(200);
        await res.arrayBuffer();
      }
      const over = await call('supported', key);
      expect(over.status).toBe(429);
      const retryAfter = Number(over.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(60);
      expect((await over.json()).error).toMatchObject({
        code: 'rate_limited',
        limit: PER_MINUTE,
        retryAfterSeconds: retryAfter,
        message: expect.stringContaining(`at most ${PER_MINUTE} facilitator calls per minute per seller key`),
        requestId: expect.any(String),
      });
      // Another seller's key has its own bucket.
      expect((await call('supported', await newSellerKey())).status).toBe(200);
    });
  });

  it(`rate-limits discovery to ${DISCOVERY_PER_MINUTE} requests a minute per client address`, async () => {
    const statuses: number[] = [];
    await justPastMinuteStart(async () => {
      for (let i = 0; i <= DISCOVERY_PER_MINUTE; i++) {
        const res = await fetch(`${h.gateway.url}/api/v1/x402/discovery/resources`);
        statuses.push(res.status);
        await res.arrayBuffer();
      }
    });
    expect(statuses).toEqual([...Array(DISCOVERY_PER_MINUTE).fill(200), 429]);
  });

  it('does not offer x402 on a skill priced below the minimum (the buyer pays with X-402-Payment)', async () => {
    const upstream = await startUpstream();
    try {
      const base = skillSnapshot({ name: 'cheap', apiBaseUrl: `${upstream.url}/seller` });
      await h.publishSkill({
        ...base,
        endpoints: base.endpoints.map((e, i) => ({ ...e, price: i === 0 ? '0.001' : e.price })),
      });
      const cheap = await fetch(`${h.gateway.url}/api/v1/skills/cheap/data`);
      expect(cheap.status).toBe(402);
      expect(cheap.headers.get('payment-required')).toBeNull();
      expect(await cheap.json()).toMatchObject({ price: '0.001' });
      const dear = await fetch(`${h.gateway.url}/api/v1/skills/cheap/echo`, { method: 'POST' });
      expect(dear.status).toBe(402);
      expect(dear.headers.get('payment-required')).not.toBeNull();
      await dear.arrayBuffer();
    } finally {
      await upstream.close();
    }
  });
  it('answers 503 settlement_in_progress while another request settles the authorization: the error envelope beside the SettleResponse', async () => {
    const key = await newSellerKey();
    const payer = await newPayer();
    const { signed, body } = await facilitatorBody(payer, 10_000n);
    // Another request holds the authorization (its row `submitting`, nothing sent yet).
    const claimed = await h.gateway.state.x402.authorizations.claim(
      { version: 2, scheme: 'exact', network: NETWORK, ...signed },
      {
        resource: 'x402 https://seller.example/report',
        priceMicro: 10_000n,
        kind: 'payPerCall',
        durationDays: null,
        sellerId: 'another-request',
        skillId: null,
        skillName: null,
        endpointId: null,
        holdPeriodHours: 0,
        claimedVia: 'facilitator',
      },
      2,
    );
    expect(claimed).toBeDefined();
    try {
      const res = await call('settle', key, body);
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('2');
      expect(await res.json()).toEqual({
        success: false,
        errorReason: 'settlement_in_progress',
        errorMessage: expect.stringContaining('being settled'),
        payer: signed.authorization.from,
        transaction: '',
        network: NETWORK,
        error: {
          code: 'settlement_in_progress',
          message: expect.stringContaining('being settled'),
          requestId: res.headers.get('x-request-id'),
        },
      });
    } finally {
      await h.gateway.state.x402.authorizations.forget(claimed!);
    }
  });

  // Last: stops the relayer.
  it("answers 503 relayer_unavailable without the relayer, which @x402/core's client reads as a SettleError", async () => {
    const key = await newSellerKey();
    await settlement.stop();
    const direct = await facilitatorBody(await newPayer(), 10_000n);
    const res = await call('settle', key, direct.body);
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({
      success: false,
      errorReason: 'relayer_unavailable',
      error: { code: 'relayer_unavailable', requestId: res.headers.get('x-request-id') },
    });
    const client = new HTTPFacilitatorClient({
      url: `${h.gateway.url}/api/v1/x402`,
      createAuthHeaders: async () => {
        const auth = { Authorization: `Bearer ${key}` };
        return { verify: auth, settle: auth, supported: auth };
      },
    });
    const viaClient = await facilitatorBody(await newPayer(), 10_000n);
    type Settle = Parameters<HTTPFacilitatorClient['settle']>;
    const thrown = await client
      .settle(viaClient.body.paymentPayload as Settle[0], viaClient.body.paymentRequirements as Settle[1])
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    expect(thrown).toMatchObject({
      name: 'SettleError',
      statusCode: 503,
      errorReason: 'relayer_unavailable',
    });
  });
});
