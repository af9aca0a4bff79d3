import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { decodePaymentRequired, encodeX402Header, MAX_X402_HEADER_BYTES } from '@paygate/protocol';
import type { RunningSettlement } from '@paygate/settlement';
import {
  deploySmartWallet,
  mine,
  minedReceipt,
  openSchema,
  serveSellersForTests,
  setAutomine,
  signTransferAuthorization,
  testSigner,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { decodePaymentResponseHeader, wrapFetchWithPaymentFromConfig } from '@x402/fetch';
import { Contract } from 'ethers';
import { privateKeyToAccount } from 'viem/accounts';
import { loadConfig, startGatewayProxy } from '../src';
import type { GatewayDatabase } from '../src/db';
import type { Purchase } from '../src/payments/types';
import { X402Authorizations } from '../src/x402/mechanisms/exact-evm/authorizations';
import { decodeX402Payment } from '../src/x402/protocol';
import { type Harness, skillSnapshot, startHarness, startUpstream } from './harness';
import { startRelayer, x402ClientConfig } from './relayer';

type Upstream = Awaited<ReturnType<typeof startUpstream>>;

describe('x402: standard clients pay Paygate skills gaslessly', () => {
  let h: Harness;
  let upstream: Upstream;
  let settlement: RunningSettlement;
  const network = 'eip155:31337';

  beforeAll(async () => {
    // Many payments from one wallet in one minute: the limit itself is tested in ratelimit.test.ts.
    h = await startHarness('x402', {
      RELAYER_TIMEOUT_MS: '2000',
      RATE_LIMIT_PER_MINUTE: '100000',
      // A caller waits at most 1 s for inclusion; what it gave up on is finished by the recovery pass soon after.
      X402_INCLUSION_WAIT_MS: '1000',
      X402_RECOVERY_AFTER_MS: '300',
      X402_RECOVERY_INTERVAL_MS: '200',
    });
    upstream = await startUpstream();
    settlement = await startRelayer(h);
    await h.publishSkill(skillSnapshot({ name: 'wx', apiBaseUrl: `${upstream.url}/seller` }));
  });

  afterAll(async () => {
    await settlement?.stop();
    await upstream?.close();
    await h?.stop();
  });

  const url = (path: string) => `${h.gateway.url}/api/v1/skills/wx${path}`;
  const escrowBalance = () =>
    h.anvil.provider
      .call({
        to: h.usdcAddress,
        data: `0x70a08231000000000000000000000000${testWallets.escrow.address.slice(2).toLowerCase()}`,
      })
      .then(BigInt);
  const relayerNonce = () => h.anvil.provider.getTransactionCount(testWallets.relayer.address, 'latest');

  function x402Fetch(role: 'buyer' | 'stranger' = 'buyer') {
    const account = privateKeyToAccount(testWallets[role].privateKey as `0x${string}`);
    return wrapFetchWithPaymentFromConfig(fetch, x402ClientConfig(h, account));
  }

  it('402 carries the v2 PAYMENT-REQUIRED header (token domain read from the contract, bazaar extension), no-store and CORS', async () => {
    const res = await fetch(url('/data'));
    expect(res.status).toBe(402);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('access-control-expose-headers')).toMatch(/PAYMENT-REQUIRED/);
    const required = decodePaymentRequired(res.headers.get('payment-required')!) as any;
    expect(required).toMatchObject({
      x402Version: 2,
      resource: { url: 'http://paygate.test/api/v1/skills/wx/data', mimeType: 'application/json' },
      accepts: [
        {
          scheme: 'exact',
          network,
          amount: '50000',
          asset: h.usdcAddress,
          payTo: testWallets.escrow.address,
          extra: { name: 'USD Coin', version: '2' },
        },
      ],
    });
    expect(required.extensions.bazaar.info.input).toMatchObject({ type: 'http', method: 'GET' });
    // Paygate's own body is unchanged, and on a local chain no v1 list is offered.
    const body = await res.json();
    expect(body).toMatchObject({ price: '0.05', network: 'local', payTo: testWallets.escrow.address });
    expect(body.accepts).toBeUndefined();
    const preflight = await fetch(url('/data'), { method: 'OPTIONS' });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-headers')).toMatch(/PAYMENT-SIGNATURE/);
  });

  it('the unmodified @x402/fetch client pays; the seller never sees the payment headers; escrow receives the price', async () => {
    const before = await escrowBalance();
    const seen = upstream.requests.length;
    const res = await x402Fetch()(url('/data?city=oslo'));
    expect(res.status).toBe(200);
    const settled = decodePaymentResponseHeader(res.headers.get('payment-response')!);
    expect(settled).toMatchObject({ success: true, network, payer: testWallets.buyer.address });
    expect(await escrowBalance()).toBe(before + 50_000n);
    const reached = upstream.requests.slice(seen);
    expect(reached).toHaveLength(1);
    expect(reached[0]!.url).toBe('/seller/data?city=oslo');
    expect(reached[0]!.headers['payment-signature']).toBeUndefined();
    expect(reached[0]!.headers['x-payment']).toBeUndefined();
    expect(reached[0]!.headers['x-paygate-tx-hash']).toBe(settled.transaction.toLowerCase());
    // The claim is marked served once the seller's answer has been relayed, so just after the buyer has it.
    const claim = await waitFor(
      async () => {
        const row = await h.db
          .selectFrom('payment_claims')
          .selectAll()
          .where('tx_hash', '=', settled.transaction.toLowerCase())
          .executeTakeFirst();
        return row?.state === 'served' && row;
      },
      { message: 'the x402 claim was never marked served' },
    );
    expect(claim).toMatchObject({ payer: testWallets.buyer.address, amount_micro: 50_000n, state: 'served' });
  });

  async function header(
    overrides: Parameters<typeof signTransferAuthorization>[1] extends infer T ? Partial<T> : never = {},
    role: 'buyer' | 'seller' = 'buyer',
    /** Over the client's `accepted` copy of the requirements, and extra top-level fields of the payload. */
    lies: { accepted?: Record<string, unknown>; extensions?: Record<string, unknown> } = {},
  ) {
    const signed = await signTransferAuthorization(testSigner(role, h.anvil.provider), {
      chainId: 31337,
      usdcAddress: h.usdcAddress,
      to: testWallets.escrow.address,
      valueMicro: 50_000n,
      ...overrides,
    });
    return encodeX402Header({
      x402Version: 2,
      accepted: {
        scheme: 'exact',
        network,
        amount: '50000',
        asset: h.usdcAddress,
        payTo: testWallets.escrow.address,
        maxTimeoutSeconds: 60,
        extra: { name: 'USD Coin', version: '2' },
        ...lies.accepted,
      },
      payload: signed,
      ...(lies.extensions ? { extensions: lies.extensions } : {}),
    });
  }

  it('a replay and 50 concurrent identical headers give exactly one transaction, one credit, one served call', async () => {
    const payment = await header();
    const nonceBefore = await relayerNonce();
    const seen = upstream.requests.length;
    const answers = await Promise.all(
      Array.from({ length: 50 }, () => fetch(url('/data'), { headers: { 'PAYMENT-SIGNATURE': payment } })),
    );
    const statuses = answers.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.every((s) => s === 200 || s === 402 || s === 503)).toBe(true);
    expect(await relayerNonce()).toBe(nonceBefore + 1);
    expect(upstream.requests.length - seen).toBe(1);
    const replay = await fetch(url('/data'), { headers: { 'PAYMENT-SIGNATURE': payment } });
    expect(replay.status).toBe(402);
    expect((await replay.json()).reason).toBe('invalid_exact_evm_nonce_already_used');
    expect(await relayerNonce()).toBe(nonceBefore + 1);
  });

  it.each([
    ['wrong amount', { valueMicro: 40_000n }, 'invalid_exact_evm_payload_authorization_value_mismatch'],
    ['wrong payTo', { to: testWallets.stranger.address }, 'invalid_exact_evm_recipient_mismatch'],
    [
      'expired',
      { validBefore: Math.floor(Date.now() / 1000) + 2 },
      'invalid_exact_evm_payload_authorization_valid_before',
    ],
    [
      'not yet valid',
      { validAfter: Math.floor(Date.now() / 1000) + 600 },
      'invalid_exact_evm_payload_authorization_valid_after',
    ],
    ['wrong domain (other chain)', { chainId: 8453 }, 'invalid_exact_evm_signature'],
    [
      'wrong asset (domain of another token)',
      { usdcAddress: testWallets.platform.address },
      'invalid_exact_evm_signature',
    ],
  ])('refuses %s with 402 and its x402 reason, sending no transaction', async (_name, overrides, reason) => {
    const nonceBefore = await relayerNonce();
    const res = await fetch(url('/data'), {
      headers: { 'PAYMENT-SIGNATURE': await header(overrides as never) },
    });
    expect(res.status).toBe(402);
    expect((await res.json()).reason).toBe(reason);
    expect(res.headers.get('payment-required')).toBeTruthy();
    expect(await relayerNonce()).toBe(nonceBefore);
  });

  it('a contract wallet pays with its ERC-1271 signature (its owner signed)', async () => {
    const deployer = testSigner('deployer', h.anvil.provider);
    const wallet = await deploySmartWallet(deployer, testWallets.buyer.address);
    const usdc = new Contract(
      h.usdcAddress,
      ['function mint(address to, uint256 amount) returns (bool)'],
      deployer,
    );
    await minedReceipt(await usdc.getFunction('mint')(wallet, 1_000_000n));
    const res = await fetch(url('/data'), {
      headers: { 'PAYMENT-SIGNATURE': await header({ from: wallet }) },
    });
    expect(res.status).toBe(200);
    expect(decodePaymentResponseHeader(res.headers.get('payment-response')!)).toMatchObject({
      success: true,
      payer: wallet,
    });
    // The owner's signature for another contract's payments is not the wallet's.
    const stranger = await deploySmartWallet(deployer, testWallets.stranger.address);
    await minedReceipt(await usdc.getFunction('mint')(stranger, 1_000_000n));
    const refused = await fetch(url('/data'), {
      headers: { 'PAYMENT-SIGNATURE': await header({ from: stranger }) },
    });
    expect((await refused.json()).reason).toBe('invalid_exact_evm_signature');
  });

  it('refuses a wrong network, a forged signature and a payer without the money, with no gas spent', async () => {
    const nonceBefore = await relayerNonce();
    const signed = await signTransferAuthorization(testSigner('buyer', h.anvil.provider), {
      chainId: 31337,
      usdcAddress: h.usdcAddress,
      to: testWallets.escrow.address,
      valueMicro: 50_000n,
    });
    const wrongNetwork = encodeX402Header({
      x402Version: 2,
      accepted: {
        scheme: 'exact',
        network: 'eip155:8453',
        amount: '50000',
        asset: h.usdcAddress,
        payTo: testWallets.escrow.address,
        maxTimeoutSeconds: 60,
      },
      payload: signed,
    });
    let res = await fetch(url('/data'), { headers: { 'PAYMENT-SIGNATURE': wrongNetwork } });
    expect((await res.json()).reason).toBe('invalid_exact_evm_network_mismatch');
    const forged = encodeX402Header({
      x402Version: 2,
      accepted: {
        scheme: 'exact',
        network,
        amount: '50000',
        asset: h.usdcAddress,
        payTo: testWallets.escrow.address,
        maxTimeoutSeconds: 60,
      },
      payload: { ...signed, authorization: { ...signed.authorization, from: testWallets.stranger.address } },
    });
    res = await fetch(url('/data'), { headers: { 'PAYMENT-SIGNATURE': forged } });
    expect((await res.json()).reason).toBe('invalid_exact_evm_signature');
    // A wallet with no USDC (the seller's, here): refused before anything is submitted.
    const poor = await header({}, 'seller');
    res = await fetch(url('/data'), { headers: { 'PAYMENT-SIGNATURE': poor } });
    expect(res.status).toBe(402);
    expect((await res.json()).reason).toBe('invalid_exact_evm_insufficient_balance');
    const garbage = await fetch(url('/data'), { headers: { 'PAYMENT-SIGNATURE': 'not base64 json!' } });
    expect(garbage.status).toBe(402);
    expect((await garbage.json()).reason).toBe('invalid_payload');
    expect(await relayerNonce()).toBe(nonceBefore);
  });

  it('a payment not included while its caller waited answers 202 settlement_pending, is credited once by the recovery pass, and the same header then gets the call', async () => {
    await setAutomine(h.anvil.provider, false);
    const payment = await header();
    const seen = upstream.requests.length;
    try {
      const waiting = await fetch(url('/data'), { headers: { 'PAYMENT-SIGNATURE': payment } });
      expect(waiting.status).toBe(202);
      expect(waiting.headers.get('retry-after')).toBe('2');
      // @x402/evm's code for a transaction broadcast but not yet included.
      expect((await waiting.json()).error.code).toBe('settlement_pending');
      await mine(h.anvil.provider, 1);
    } finally {
      await setAutomine(h.anvil.provider, true);
    }
    const nonce = JSON.parse(Buffer.from(payment, 'base64').toString('utf8')).payload.authorization.nonce;
    const row = await waitFor(
      async () => {
        const r = await h.db
          .selectFrom('x402_authorizations')
          .selectAll()
          .where('auth_nonce', '=', nonce.toLowerCase())
          .executeTakeFirst();
        return r?.state === 'settled' && r;
      },
      { timeoutMs: 10_000, message: 'the recovery pass did not credit the payment' },
    );
    const claims = await h.db
      .selectFrom('payment_claims')
      .selectAll()
      .where('tx_hash', '=', row.tx_hash)
      .execute();
    expect(claims).toHaveLength(1);
    expect(claims[0]!.state).toBe('retryable');
    const served = await fetch(url('/data'), { headers: { 'PAYMENT-SIGNATURE': payment } });
    expect(served.status).toBe(200);
    expect(upstream.requests.length - seen).toBe(1);
  });

  it('a payment the recovery pass took over stays when its stalled caller gives its claim back: the same header then gets the call', async () => {
    const payment = await header();
    const purchase: Purchase = {
      resource: h.resource('GET', 'wx', '/data'),
      priceMicro: 50_000n,
      kind: 'payPerCall',
      durationDays: null,
      sellerId: 'seller-1',
      skillId: 'skill-wx',
      skillName: 'wx',
      endpointId: 'ep-wx-1',
      holdPeriodHours: 0,
      claimedVia: 'proxy',
    };
    // A live caller claims the authorization as settle() does, then stalls (its budget check waits on Postgres)
    // past the recovery bound: the recovery pass takes the authorization over and settles it.
    const authorizations = new X402Authorizations(
      h.db,
      { chainId: 31337, usdcAddress: h.usdcAddress },
      h.clock.now,
    );
    const claimed = await authorizations.claim(decodeX402Payment(payment, 2), purchase, 2);
    expect(claimed).toBeDefined();
    h.clock.advance(10_000);
    try {
      const settled = await waitFor(
        async () => {
          const row = await authorizations.find(claimed!.key);
          return row?.state === 'settled' && row;
        },
        { timeoutMs: 10_000, message: 'the recovery pass did not settle the authorization' },
      );
      expect(settled.claim_id).toBeTruthy();
    } finally {
      h.clock.set(Date.now());
    }
    // The stalled caller comes back refused (over its budget, say) and gives its claim back: it no longer holds it.
    await authorizations.forget(claimed!);
    expect((await authorizations.find(claimed!.key))?.state).toBe('settled');
    // The buyer, told to try again, presents the same header: the payment the recovery pass credited serves it.
    const seen = upstream.requests.length;
    const served = await fetch(url('/data'), { headers: { 'PAYMENT-SIGNATURE': payment } });
    expect(served.status).toBe(200);
    await served.arrayBuffer();
    expect(upstream.requests.length - seen).toBe(1);
  });

  it('a PAYMENT-SIGNATURE over MAX_X402_HEADER_BYTES is refused with 402 and a reason before decoding, sending no transaction', async () => {
    const nonceBefore = await relayerNonce();
    const seen = upstream.requests.length;
    // A well-signed payment that would be accepted, padded (in the free-form extensions) just over the limit.
    const unpadded = await header();
    const padding = 'x'.repeat(Math.ceil(((MAX_X402_HEADER_BYTES - unpadded.length) * 3) / 4) + 64);
    const oversized = await header({}, 'buyer', { extensions: { padding } });
    expect(oversized.length).toBeGreaterThan(MAX_X402_HEADER_BYTES);
    expect(oversized.length).toBeLessThan(MAX_X402_HEADER_BYTES + 512);
    const res = await fetch(url('/data'), { headers: { 'PAYMENT-SIGNATURE': oversized } });
    expect(res.status).toBe(402);
    const body = await res.json();
    expect(body.reason).toBe('invalid_payload');
    expect(body.message).toMatch(/larger than/);
    expect(res.headers.get('payment-required')).toBeTruthy();
    // The same size in v1's header is refused alike.
    const v1 = await fetch(url('/data'), { headers: { 'X-PAYMENT': oversized } });
    expect(v1.status).toBe(402);
    expect((await v1.json()).reason).toBe('invalid_payload');
    expect(await relayerNonce()).toBe(nonceBefore);
    expect(upstream.requests.length).toBe(seen);
  });

  it.each([
    [
      'a lower amount',
      { valueMicro: 40_000n },
      { amount: '40000' },
      'invalid_exact_evm_payload_authorization_value_mismatch',
    ],
    [
      'another payTo',
      { to: testWallets.stranger.address },
      { payTo: testWallets.stranger.address },
      'invalid_exact_evm_recipient_mismatch',
    ],
    [
      'another asset (signed in its domain)',
      { usdcAddress: testWallets.platform.address },
      { asset: testWallets.platform.address },
      'invalid_exact_evm_signature',
    ],
  ])(
    'a payment whose accepted copy agrees with its bad authorization (%s) is refused: Paygate checks its own requirements',
    async (_name, authorization, accepted, reason) => {
      const nonceBefore = await relayerNonce();
      const seen = upstream.requests.length;
      const res = await fetch(url('/data'), {
        headers: { 'PAYMENT-SIGNATURE': await header(authorization as never, 'buyer', { accepted }) },
      });
      expect(res.status).toBe(402);
      expect((await res.json()).reason).toBe(reason);
      expect(await relayerNonce()).toBe(nonceBefore);
      expect(upstream.requests.length).toBe(seen);
    },
  );

  it("a seller's PAYMENT-RESPONSE, X-PAYMENT-RESPONSE and PAYMENT-REQUIRED never reach the buyer as the seller set them", async () => {
    const forged = encodeX402Header({
      success: true,
      transaction: `0x${'ab'.repeat(32)}`,
      network,
      payer: testWallets.stranger.address,
    });
    const liar = http.createServer((_req, res) => {
      res.writeHead(200, {
        'content-type': 'application/json',
        'PAYMENT-RESPONSE': forged,
        'X-PAYMENT-RESPONSE': forged,
        'PAYMENT-REQUIRED': forged,
      });
      res.end('{"ok":true}');
    });
    await new Promise<void>((resolve) => liar.listen(0, '127.0.0.1', resolve));
    try {
      const port = (liar.address() as AddressInfo).port;
      await h.publishSkill(skillSnapshot({ name: 'liar', apiBaseUrl: `http://127.0.0.1:${port}` }));
      const liarUrl = `${h.gateway.url}/api/v1/skills/liar/data`;
      // Paid with x402 (v2): PAYMENT-RESPONSE is Paygate's own; the other two are not relayed at all.
      const paid = await fetch(liarUrl, { headers: { 'PAYMENT-SIGNATURE': await header() } });
      expect(paid.status).toBe(200);
      const settled = decodePaymentResponseHeader(paid.headers.get('payment-response')!);
      expect(paid.headers.get('payment-response')).not.toBe(forged);
      expect(settled).toMatchObject({ success: true, network, payer: testWallets.buyer.address });
      expect(settled.transaction).not.toBe(`0x${'ab'.repeat(32)}`);
      expect(paid.headers.get('x-payment-response')).toBeNull();
      expect(paid.headers.get('payment-required')).toBeNull();
      // Paid with Paygate's own proof: none of the three reaches the buyer.
      const txHash = await h.transfer('buyer', 50_000n);
      const proof = await h.header({ txHash, resource: h.resource('GET', 'liar', '/data') });
      const own = await fetch(liarUrl, { headers: { 'X-402-Payment': proof } });
      expect(own.status).toBe(200);
      expect(own.headers.get('payment-response')).toBeNull();
      expect(own.headers.get('x-payment-response')).toBeNull();
      expect(own.headers.get('payment-required')).toBeNull();
    } finally {
      liar.closeAllConnections();
      await new Promise((resolve) => liar.close(resolve));
    }
  });

  it('with the chain RPC down, x402 is not offered and a payment answers 503', async () => {
    const cut = await startGatewayProxy(
      loadConfig(
        h.env.envFor('gateway-proxy', {
          ...h.gatewayEnv,
          CHAIN_RPC_URL: 'http://127.0.0.1:9',
          DB_SCHEMA: h.env.schemaFor('gateway-proxy-cut'),
        }),
      ),
    );
    try {
      // The skill projection's durable consumer is shared with the first gateway, which already took the
      // skill: the cut gateway's catalog gets the same row directly (without it, the skill is unknown: 404).
      const row = await h.db
        .selectFrom('skills')
        .selectAll()
        .where('name', '=', 'wx')
        .executeTakeFirstOrThrow();
      const cutDb = openSchema<GatewayDatabase>(h.env.schemaFor('gateway-proxy-cut'));
      try {
        await cutDb.insertInto('skills').values(row).execute();
      } finally {
        await cutDb.destroy();
      }
      cut.state.skills.invalidate();
      const challenge = await fetch(`${cut.url}/api/v1/skills/wx/data`);
      expect(challenge.status).toBe(402);
      expect(challenge.headers.get('payment-required')).toBeNull();
      const res = await fetch(`${cut.url}/api/v1/skills/wx/data`, {
        headers: { 'PAYMENT-SIGNATURE': await header() },
      });
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('2');
      expect(await res.json()).toEqual({
        error: {
          code: 'chain_unavailable',
          message: expect.stringMatching(/chain RPC/),
          requestId: res.headers.get('x-request-id'),
        },
      });
      // The facilitator's verify: the error envelope beside the VerifyResponse (what @x402/core's client reads).
      const sellerKey = 'sk_test_x402_rpc_down_0123456789';
      await serveSellersForTests(h.bus, {
        [sellerKey]: {
          sellerId: 'seller-rpc-down',
          walletAddress: testWallets.seller.address,
          payoutAddress: testWallets.seller.address,
          publishableKey: 'pk_test_x402_rpc_down_0123456789',
          apiKeyVersion: 1,
        },
      });
      const signed = await signTransferAuthorization(testSigner('buyer', h.anvil.provider), {
        chainId: 31337,
        usdcAddress: h.usdcAddress,
        to: testWallets.escrow.address,
        valueMicro: 50_000n,
      });
      const requirements = {
        scheme: 'exact',
        network,
        asset: h.usdcAddress,
        payTo: testWallets.escrow.address,
        amount: '50000',
        maxTimeoutSeconds: 60,
        extra: { name: 'USD Coin', version: '2' },
      };
      const verified = await fetch(`${cut.url}/api/v1/x402/verify`, {
        method: 'POST',
        headers: { authorization: `Bearer ${sellerKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          x402Version: 2,
          paymentPayload: { x402Version: 2, accepted: requirements, payload: signed },
          paymentRequirements: requirements,
        }),
      });
      expect(verified.status).toBe(503);
      expect(verified.headers.get('retry-after')).toBe('2');
      expect(await verified.json()).toEqual({
        isValid: false,
        invalidReason: 'chain_unavailable',
        invalidMessage: expect.stringMatching(/chain RPC/),
        payer: signed.authorization.from,
        error: {
          code: 'chain_unavailable',
          message: expect.stringMatching(/chain RPC/),
          requestId: verified.headers.get('x-request-id'),
        },
      });
      // A tx-hash proof that cannot be checked on chain: the same envelope, nothing claimed.
      const txHash = `0x${'ab'.repeat(32)}`;
      const proof = await fetch(`${cut.url}/api/v1/skills/wx/data`, {
        headers: { 'X-402-Payment': await h.header({ txHash, resource: h.resource('GET', 'wx', '/data') }) },
      });
      expect(proof.status).toBe(503);
      expect(proof.headers.get('retry-after')).toBe('2');
      expect(await proof.json()).toEqual({
        error: {
          code: 'chain_unavailable',
          message: expect.any(String),
          requestId: proof.headers.get('x-request-id'),
        },
      });
    } finally {
      await cut.stop();
    }
  });

  it('without a relayer that can pay gas, x402 is not offered and an x402 payment answers 503', async () => {
    await settlement.stop();
    const payment = await header();
    const res = await fetch(url('/data'), { headers: { 'PAYMENT-SIGNATURE': payment } });
    expect(res.status).toBe(503);
    expect((await res.json()).error.code).toBe('relayer_unavailable');
    await waitFor(async () => !(await fetch(url('/data'))).headers.get('payment-required'), {
      timeoutMs: 10_000,
      message: 'x402 still offered without a relayer',
    });
  });
});
