import type { AddressInfo } from 'node:net';
import { loadConfig as loadRegistryConfig, startRegistry } from '@paygate/registry';
import type { StartedService } from '@paygate/runtime';
import {
  loadConfig as loadSettlementConfig,
  type RunningSettlement,
  startSettlement,
} from '@paygate/settlement';
import {
  createActiveSkill,
  signTransferAuthorization,
  signUpSeller,
  testSigner,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { HTTPFacilitatorClient } from '@x402/core/server';
import { ExactEvmScheme as ExactEvmClient } from '@x402/evm';
import { ExactEvmScheme as ExactEvmServer } from '@x402/evm/exact/server';
import { paymentMiddleware, x402ResourceServer } from '@x402/express';
import { decodePaymentResponseHeader, wrapFetchWithPaymentFromConfig } from '@x402/fetch';
import { Contract, Wallet } from 'ethers';
import express from 'express';
import { createWalletClient, defineChain, http } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { wrapFetchWithPayment as wrapFetchWithPaymentV1 } from 'x402-fetch';
import { type Harness, skillSnapshot, startHarness, startUpstream } from './harness';

jest.setTimeout(90_000);

/** The relayer's second key: anvil's public dev account 8 (funded, no role in the tests). */
const secondRelayer = new Wallet('0xdbda1821b80551c9d65939329250298aa3472ba22feea921c0cf5d620ea67b97');

function startRelayer(h: Harness, networkName: string): Promise<RunningSettlement> {
  return startSettlement(
    loadSettlementConfig(
      h.env.envFor('settlement', {
        CHAIN_RPC_URL: h.anvil.rpcUrl,
        CHAIN_NETWORK: networkName,
        USDC_ADDRESS: h.usdcAddress,
        ESCROW_PRIVATE_KEY: testWallets.escrow.privateKey,
        RELAYER_PRIVATE_KEYS: `${testWallets.relayer.privateKey},${secondRelayer.privateKey}`,
        CONFIRMATIONS: '1',
        SCHEDULER_INTERVAL_MS: '3600000',
        TRANSFER_POLL_INTERVAL_MS: '200',
      }),
    ),
  );
}

describe('x402 facilitator mode and discovery, with the real registry and the reference @x402/express server', () => {
  let h: Harness;
  let registry: StartedService;
  let settlement: RunningSettlement;
  let sellerApp: import('node:http').Server;
  let sellerUrl: string;
  let apiKey: string;
  const network = 'eip155:31337';

  beforeAll(async () => {
    h = await startHarness('x402fac', { RATE_LIMIT_PER_MINUTE: '100000' });
    registry = await startRegistry(
      loadRegistryConfig(
        h.env.envFor('registry', { PUBLIC_BASE_URL: 'http://paygate.test', VALIDATION_INTERVAL_MS: '200' }),
      ),
    );
    settlement = await startRelayer(h, 'local');
    apiKey = (await signUpSeller(registry.url, testWallets.seller.privateKey)).apiKey;
    await waitFor(() => h.gateway.state.x402.offered(), { timeoutMs: 10_000, message: 'x402 never offered' });

    // The seller's own server: the unmodified reference middleware, pointed at Paygate as its facilitator.
    const facilitator = new HTTPFacilitatorClient({
      url: `${h.gateway.url}/api/v1/x402`,
      createAuthHeaders: async () => {
        const auth = { Authorization: `Bearer ${apiKey}` };
        return { verify: auth, settle: auth, supported: auth };
      },
    });
    const server = new x402ResourceServer(facilitator).register(network, new ExactEvmServer());
    const app = express();
    app.use(
      paymentMiddleware(
        {
          'GET /report': {
            accepts: {
              scheme: 'exact',
              network,
              payTo: testWallets.escrow.address,
              price: { amount: '70000', asset: h.usdcAddress, extra: { name: 'USD Coin', version: '2' } },
            },
            description: 'A paid report',
          },
        },
        server,
      ),
    );
    app.get('/report', (_req, res) => {
      res.json({ report: 'paid content' });
    });
    sellerApp = await new Promise((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    sellerUrl = `http://127.0.0.1:${(sellerApp.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await new Promise((resolve) => sellerApp?.close(resolve));
    await settlement?.stop();
    await registry?.stop();
    await h?.stop();
  });

  it('a seller running @x402/express with Paygate as facilitator is paid into escrow and credited', async () => {
    const account = privateKeyToAccount(testWallets.buyer.privateKey as `0x${string}`);
    const pay = wrapFetchWithPaymentFromConfig(fetch, {
      schemes: [{ network, client: new ExactEvmClient(account) }],
      spendControls: { allowedAssets: [{ network, asset: h.usdcAddress, maxAmountPerPayment: '1000000' }] },
    });
    const res = await pay(`${sellerUrl}/report`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ report: 'paid content' });
    const settled = decodePaymentResponseHeader(res.headers.get('payment-response')!);
    expect(settled).toMatchObject({ success: true, network });
    const claim = await h.db
      .selectFrom('payment_claims')
      .selectAll()
      .where('tx_hash', '=', settled.transaction.toLowerCase())
      .executeTakeFirstOrThrow();
    const seller = await (
      await fetch(`${registry.url}/api/v1/account`, { headers: { authorization: `Bearer ${apiKey}` } })
    ).json();
    expect(claim).toMatchObject({
      claimed_via: 'facilitator',
      amount_micro: 70_000n,
      seller_id: seller.sellerId,
    });
  });

  it('refuses requirements that do not pay escrow, and unauthenticated calls', async () => {
    const supported = await fetch(`${h.gateway.url}/api/v1/x402/supported`, {
      headers: { authorization: `Bearer ${apiKey}` },
    });
    // Every key of the relayer's pool is a signer (x402 v2: addresses by CAIP-2 family).
    expect(await supported.json()).toMatchObject({
      kinds: [{ x402Version: 2, scheme: 'exact', network }],
      signers: { 'eip155:*': [testWallets.relayer.address, secondRelayer.address] },
    });
    expect((await fetch(`${h.gateway.url}/api/v1/x402/supported`)).status).toBe(401);

    const relayerNonce = async () =>
      (await h.anvil.provider.getTransactionCount(testWallets.relayer.address, 'latest')) +
      (await h.anvil.provider.getTransactionCount(secondRelayer.address, 'latest'));
    const strangerBalance = () =>
      new Contract(h.usdcAddress, ['function balanceOf(address) view returns (uint256)'], h.anvil.provider)
        .getFunction('balanceOf')(testWallets.stranger.address)
        .then(BigInt);
    /** A real, well-signed payment by the buyer of 0.01 USDC (the minimum) to `to`, and the requirements it meets. */
    async function paymentTo(to: string, requirementsPayTo = to) {
      const signed = await signTransferAuthorization(testSigner('buyer', h.anvil.provider), {
        chainId: 31337,
        usdcAddress: h.usdcAddress,
        to,
        valueMicro: 10_000n,
      });
      const paymentRequirements = {
        scheme: 'exact',
        network,
        asset: h.usdcAddress,
        payTo: requirementsPayTo,
        amount: '10000',
        maxTimeoutSeconds: 60,
        extra: { name: 'USD Coin', version: '2' },
      };
      return {
        x402Version: 2,
        paymentPayload: { x402Version: 2, accepted: paymentRequirements, payload: signed },
        paymentRequirements,
      };
    }
    const call = (path: 'verify' | 'settle', body: unknown, key: string | null = apiKey) =>
      fetch(`${h.gateway.url}/api/v1/x402/${path}`, {
        method: 'POST',
        headers: {
          ...(key ? { authorization: `Bearer ${key}` } : {}),
          'content-type': 'application/json',
        },
        body: JSON.stringify(body),
      });

    const nonceBefore = await relayerNonce();
    const balanceBefore = await strangerBalance();
    // A seller's requirements paying its own wallet (and the buyer's authorization to match): Paygate is not a
    // facilitator for money that bypasses escrow.
    const toStranger = await paymentTo(testWallets.stranger.address);
    const verify = await call('verify', toStranger);
    expect(verify.status).toBe(200);
    expect(await verify.json()).toMatchObject({
      isValid: false,
      invalidReason: 'invalid_exact_evm_recipient_mismatch',
      payer: testWallets.buyer.address,
    });
    const settle = await call('settle', toStranger);
    expect(settle.status).toBe(200);
    expect(await settle.json()).toMatchObject({
      success: false,
      errorReason: 'invalid_exact_evm_recipient_mismatch',
      transaction: '',
      payer: testWallets.buyer.address,
    });
    // Requirements that name escrow do not cover an authorization paying someone else.
    const mismatched = await paymentTo(testWallets.stranger.address, testWallets.escrow.address);
    expect(await (await call('verify', mismatched)).json()).toMatchObject({
      isValid: false,
      invalidReason: 'invalid_exact_evm_recipient_mismatch',
    });
    expect(await (await call('settle', mismatched)).json()).toMatchObject({
      success: false,
      errorReason: 'invalid_exact_evm_recipient_mismatch',
      transaction: '',
    });
    expect(await relayerNonce()).toBe(nonceBefore);
    expect(await strangerBalance()).toBe(balanceBefore);
    // The same well-formed payment into escrow verifies: the refusals above are about payTo, nothing else.
    expect(await (await call('verify', await paymentTo(testWallets.escrow.address))).json()).toMatchObject({
      isValid: true,
      payer: testWallets.buyer.address,
    });
    expect((await call('verify', toStranger, null)).status).toBe(401);
    expect((await call('settle', toStranger, null)).status).toBe(401);

    const badBody = await call('settle', { x402Version: 3 });
    expect(badBody.status).toBe(400);
    expect((await badBody.json()).error.field).toBeDefined();
  });

  it('serves the catalog in the Bazaar discovery shape', async () => {
    const upstream = await startUpstream();
    try {
      await createActiveSkill(registry.url, apiKey, {
        name: 'bazaar-weather',
        apiBaseUrl: `${upstream.url}/seller`,
        endpoints: [
          { path: '/forecast', method: 'GET', priceUsdc: '0.02', description: 'Forecast for a city' },
          { path: '/alerts', method: 'POST', priceUsdc: '0.03', description: 'Subscribe to alerts' },
        ],
      });
      const list = await waitFor(
        async () => {
          const body = await (
            await fetch(`${h.gateway.url}/api/v1/x402/discovery/resources?limit=10`)
          ).json();
          return body.items.length >= 2 && body;
        },
        { timeoutMs: 15_000, message: 'skill not discoverable' },
      );
      expect(list).toMatchObject({ x402Version: 2, pagination: { limit: 10, offset: 0, total: 2 } });
      const forecast = list.items.find((i: any) => i.resource.endsWith('/bazaar-weather/forecast'));
      expect(forecast).toMatchObject({
        type: 'http',
        x402Version: 2,
        accepts: [{ scheme: 'exact', network, amount: '20000', payTo: testWallets.escrow.address }],
      });
      expect(forecast.extensions.bazaar.info.input).toMatchObject({ type: 'http', method: 'GET' });
      const page = await (
        await fetch(`${h.gateway.url}/api/v1/x402/discovery/resources?limit=1&offset=1`)
      ).json();
      expect(page.items).toHaveLength(1);
      expect((await fetch(`${h.gateway.url}/api/v1/x402/discovery/resources?limit=1000`)).status).toBe(400);
    } finally {
      await upstream.close();
    }
  });
});

describe('x402 v1: the v1 client pays on base-sepolia (anvil with chain id 84532)', () => {
  let h: Harness;
  let settlement: RunningSettlement;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;

  beforeAll(async () => {
    h = await startHarness(
      'x402v1',
      { CHAIN_NETWORK: 'base-sepolia', RATE_LIMIT_PER_MINUTE: '100000' },
      { chainId: 84532 },
    );
    settlement = await startRelayer(h, 'base-sepolia');
    upstream = await startUpstream();
    await h.publishSkill(skillSnapshot({ name: 'v1', apiBaseUrl: `${upstream.url}/seller` }));
    await waitFor(() => h.gateway.state.x402.offered(), { timeoutMs: 10_000, message: 'x402 never offered' });
  });

  afterAll(async () => {
    await settlement?.stop();
    await upstream?.close();
    await h?.stop();
  });

  it('the 402 body offers v1 accepts on Base Sepolia, and x402-fetch (v1) pays with X-PAYMENT', async () => {
    const url = `${h.gateway.url}/api/v1/skills/v1/data`;
    const challenge = await (await fetch(url)).json();
    expect(challenge).toMatchObject({
      x402Version: 1,
      accepts: [
        { scheme: 'exact', network: 'base-sepolia', maxAmountRequired: '50000', asset: h.usdcAddress },
      ],
    });
    const chain = defineChain({
      id: 84532,
      name: 'anvil-base-sepolia',
      nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
      rpcUrls: { default: { http: [h.anvil.rpcUrl] } },
    });
    const wallet = createWalletClient({
      account: privateKeyToAccount(testWallets.buyer.privateKey as `0x${string}`),
      chain,
      transport: http(h.anvil.rpcUrl),
    });
    const pay = wrapFetchWithPaymentV1(fetch, wallet as never, 100_000n);
    const res = await pay(url);
    expect(res.status).toBe(200);
    const settled = JSON.parse(
      Buffer.from(res.headers.get('x-payment-response')!, 'base64').toString('utf8'),
    );
    expect(settled).toMatchObject({
      success: true,
      network: 'base-sepolia',
      payer: testWallets.buyer.address,
    });
  });
});
