import { loadConfig as loadRegistryConfig, startRegistry } from '@paygate/registry';
import type { StartedService } from '@paygate/runtime';
import type { RunningSettlement } from '@paygate/settlement';
import { signUpSeller, testWallets } from '@paygate/testing';
import { createWalletClient, defineChain, http } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { createPaymentHeader } from 'x402/client';
import { wrapFetchWithPayment } from 'x402-fetch';
import { type Harness, skillSnapshot, startHarness, startUpstream } from './harness';
import { startRelayer } from './relayer';

jest.setTimeout(90_000);

const decode = (header: string) => JSON.parse(Buffer.from(header, 'base64').toString('utf8'));

/**
 * x402 v1 end to end, as its own client speaks it: `x402-fetch` (X-PAYMENT, X-PAYMENT-RESPONSE) and the `x402`
 * package's payment header sent to Paygate's facilitator, on anvil reporting Base Sepolia's chain id (84532).
 */
describe('x402 v1 on a local chain with Base Sepolia chain id', () => {
  let h: Harness;
  let registry: StartedService;
  let settlement: RunningSettlement;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  let apiKey: string;

  beforeAll(async () => {
    h = await startHarness(
      'x402v1e2e',
      { CHAIN_NETWORK: 'base-sepolia', RATE_LIMIT_PER_MINUTE: '100000' },
      { chainId: 84532 },
    );
    registry = await startRegistry(
      loadRegistryConfig(h.env.envFor('registry', { PUBLIC_BASE_URL: 'http://paygate.test' })),
    );
    settlement = await startRelayer(h, { CHAIN_NETWORK: 'base-sepolia' });
    apiKey = (await signUpSeller(registry.url, testWallets.seller.privateKey)).apiKey;
    upstream = await startUpstream();
    await h.publishSkill(
      skillSnapshot({
        name: 'v1atlas',
        apiBaseUrl: `${upstream.url}/seller`,
        endpoints: [
          {
            endpointId: 'ep-v1-city',
            path: '/forecast/:city',
            method: 'GET',
            description: 'Forecast for a city',
            price: '0.02',
            isHealthy: true,
            active: true,
          },
        ],
      }),
    );
  });

  afterAll(async () => {
    await settlement?.stop();
    await registry?.stop();
    await upstream?.close();
    await h?.stop();
  });

  function wallet() {
    const chain = defineChain({
      id: 84532,
      name: 'anvil-base-sepolia',
      nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
      rpcUrls: { default: { http: [h.anvil.rpcUrl] } },
    });
    return createWalletClient({
      account: privateKeyToAccount(testWallets.buyer.privateKey as `0x${string}`),
      chain,
      transport: http(h.anvil.rpcUrl),
    });
  }

  it('x402-fetch pays a URL with a path parameter and a query; the seller gets that URL; copies of its X-PAYMENT wait instead of 503', async () => {
    const url = `${h.gateway.url}/api/v1/skills/v1atlas/forecast/oslo?units=metric`;
    const challenge = await (await fetch(url)).json();
    expect(challenge).toMatchObject({
      x402Version: 1,
      accepts: [
        {
          scheme: 'exact',
          network: 'base-sepolia',
          maxAmountRequired: '20000',
          resource: 'http://paygate.test/api/v1/skills/v1atlas/forecast/oslo?units=metric',
          asset: h.usdcAddress,
          payTo: testWallets.escrow.address,
        },
      ],
    });

    const seen = upstream.requests.length;
    const res = await wrapFetchWithPayment(fetch, wallet() as never, 100_000n)(url);
    expect(res.status).toBe(200);
    expect(decode(res.headers.get('x-payment-response')!)).toMatchObject({
      success: true,
      network: 'base-sepolia',
      payer: testWallets.buyer.address,
    });
    expect(upstream.requests.slice(seen).map((r) => r.url)).toEqual(['/seller/forecast/oslo?units=metric']);

    // The same X-PAYMENT three times at once: one call served, the copies learn it was used (402, not 503).
    const header = await createPaymentHeader(wallet() as never, 1, challenge.accepts[0]);
    const relayerNonce = () => h.anvil.provider.getTransactionCount(testWallets.relayer.address, 'latest');
    const nonceBefore = await relayerNonce();
    const answers = await Promise.all(
      Array.from({ length: 3 }, () => fetch(url, { headers: { 'X-PAYMENT': header } })),
    );
    const statuses = answers.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 402, 402]);
    for (const refused of answers.filter((r) => r.status === 402)) {
      expect((await refused.json()).reason).toBe('invalid_exact_evm_nonce_already_used');
    }
    expect(await relayerNonce()).toBe(nonceBefore + 1);
  });

  it("Paygate's facilitator settles a v1 payment (x402 package's header) on base-sepolia", async () => {
    const paymentRequirements = {
      scheme: 'exact' as const,
      network: 'base-sepolia' as const,
      maxAmountRequired: '20000',
      resource: 'https://seller.example/report?id=1',
      description: 'A report',
      mimeType: 'application/json',
      payTo: testWallets.escrow.address as `0x${string}`,
      maxTimeoutSeconds: 60,
      asset: h.usdcAddress as `0x${string}`,
      extra: { name: 'USD Coin', version: '2' },
    };
    const header = await createPaymentHeader(wallet() as never, 1, paymentRequirements);
    const call = (path: 'verify' | 'settle') =>
      fetch(`${h.gateway.url}/api/v1/x402/${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ x402Version: 1, paymentPayload: decode(header), paymentRequirements }),
      });
    expect(await (await call('verify')).json()).toMatchObject({
      isValid: true,
      payer: testWallets.buyer.address,
    });
    const settled = await call('settle');
    expect(settled.headers.get('server-timing')).toMatch(/total;dur=/);
    expect(await settled.json()).toMatchObject({
      success: true,
      network: 'base-sepolia',
      payer: testWallets.buyer.address,
      transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/),
    });
  });

  it("a v1 payment of another amount is refused with @x402/evm's v1 code for it, on the paid route and the facilitator", async () => {
    const relayerNonce = () => h.anvil.provider.getTransactionCount(testWallets.relayer.address, 'latest');
    const nonceBefore = await relayerNonce();
    // The skill costs 0.02 USDC; the buyer signs 0.03.
    const paymentRequirements = {
      scheme: 'exact' as const,
      network: 'base-sepolia' as const,
      maxAmountRequired: '30000',
      resource: `${h.gateway.url}/api/v1/skills/v1atlas/forecast/oslo`,
      description: 'Forecast for a city',
      mimeType: 'application/json',
      payTo: testWallets.escrow.address as `0x${string}`,
      maxTimeoutSeconds: 60,
      asset: h.usdcAddress as `0x${string}`,
      extra: { name: 'USD Coin', version: '2' },
    };
    const header = await createPaymentHeader(wallet() as never, 1, paymentRequirements);
    const paid = await fetch(paymentRequirements.resource, { headers: { 'X-PAYMENT': header } });
    expect(paid.status).toBe(402);
    expect((await paid.json()).reason).toBe('invalid_exact_evm_authorization_value');
    // The facilitator, with requirements asking 0.02 for the same 0.03 authorization.
    const verify = await fetch(`${h.gateway.url}/api/v1/x402/verify`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        x402Version: 1,
        paymentPayload: decode(header),
        paymentRequirements: { ...paymentRequirements, maxAmountRequired: '20000' },
      }),
    });
    expect(await verify.json()).toMatchObject({
      isValid: false,
      invalidReason: 'invalid_exact_evm_authorization_value',
    });
    expect(await relayerNonce()).toBe(nonceBefore);
  });
});
