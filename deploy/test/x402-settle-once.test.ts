/**
 * One x402 payment is one sale wherever Paygate's facilitator settles it: twenty concurrent copies of one
 * PAYMENT-SIGNATURE sent to a seller's server using `gateway.payPerCall` (libs/gateway-middleware), or of one
 * `_meta["x402/payment"]` sent to an MCP tool priced with @paygate/mcp-paywall, run the seller's handler once; the
 * other nineteen are refused as used. The copies are held in flight while the first settles (the block is mined
 * only once the relayer sent the transaction and every copy waits for it), so none of them is a later replay.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createGateway, createX402Seller } from '@paygate/gateway-middleware';
import { type Harness, startHarness } from '@paygate/gateway-proxy/test/harness';
import { createPaywall, type ToolResult } from '@paygate/mcp-paywall';
import {
  loadConfig as loadSettlementConfig,
  type RunningSettlement,
  startSettlement,
} from '@paygate/settlement';
import {
  mine,
  serveSellersForTests,
  setAutomine,
  signTransferAuthorization,
  testSigner,
  testWallets,
  waitFor,
} from '@paygate/testing';
import express from 'express';

jest.setTimeout(120_000);

const API_KEY = 'sk_test_x402_settle_once_0123456789';
const SELLER = {
  sellerId: 'seller-settle-once',
  walletAddress: testWallets.seller.address,
  payoutAddress: testWallets.seller.address,
  publishableKey: 'pk_test_x402_settle_once_0123456789',
  apiKeyVersion: 1,
};
const COPIES = 20;

const encode = (value: unknown) => Buffer.from(JSON.stringify(value), 'utf8').toString('base64');
const decode = (header: string) => JSON.parse(Buffer.from(header, 'base64').toString('utf8'));

describe('x402 through the facilitator: one payment, one served call', () => {
  let h: Harness;
  let settlement: RunningSettlement;
  let sellerServer: Server;
  let sellerUrl: string;
  let handled = 0;

  beforeAll(async () => {
    h = await startHarness('settleonce', {
      RATE_LIMIT_PER_MINUTE: '100000',
      X402_FACILITATOR_PER_MINUTE: '100000',
    });
    await serveSellersForTests(h.bus, { [API_KEY]: SELLER });
    settlement = await startSettlement(
      loadSettlementConfig(
        h.env.envFor('settlement', {
          CHAIN_RPC_URL: h.anvil.rpcUrl,
          CHAIN_NETWORK: 'local',
          USDC_ADDRESS: h.usdcAddress,
          ESCROW_PRIVATE_KEY: testWallets.escrow.privateKey,
          RELAYER_PRIVATE_KEY: testWallets.relayer.privateKey,
          CONFIRMATIONS: '1',
          SCHEDULER_INTERVAL_MS: '3600000',
          TRANSFER_POLL_INTERVAL_MS: '200',
        }),
      ),
    );
    await waitFor(() => h.gateway.state.x402.offered(), { timeoutMs: 10_000, message: 'x402 never offered' });

    const gateway = createGateway({ apiKey: API_KEY, apiBaseUrl: h.gateway.url });
    const app = express();
    app.get('/forecast', gateway.payPerCall('0.05'), (req, res) => {
      handled += 1;
      res.json({ forecast: 'sunny', x402: req.x402 });
    });
    sellerServer = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    sellerUrl = `http://127.0.0.1:${(sellerServer.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    sellerServer?.closeAllConnections();
    if (sellerServer) await new Promise((resolve) => sellerServer.close(resolve));
    await settlement?.stop();
    await h?.stop();
  });

  const relayerNonce = (tag: 'latest' | 'pending') =>
    h.anvil.provider.getTransactionCount(testWallets.relayer.address, tag);

  /** How many copies of an x402 payment wait on the gateway for the first's settlement (its metrics). */
  async function copiesWaiting(): Promise<number> {
    const metrics = await (await fetch(`${h.gateway.url}/metrics`)).text();
    return Number(/^gateway_x402_copies_waiting(?:\{[^}]*\})? (\d+)$/m.exec(metrics)?.[1] ?? Number.NaN);
  }

  /** Sends the copies with the chain paused until the relayer sent the first and every other copy waits for it. */
  async function withCopiesInFlight<T>(send: () => Array<Promise<T>>): Promise<T[]> {
    const nonceBefore = await relayerNonce('latest');
    await setAutomine(h.anvil.provider, false);
    try {
      const sent = send();
      const answered = Promise.all(sent);
      await waitFor(
        async () =>
          (await relayerNonce('pending')) === nonceBefore + 1 && (await copiesWaiting()) === sent.length - 1,
        {
          timeoutMs: 30_000,
          message: 'the relayer never sent the payment while the other copies waited for it',
        },
      );
      await mine(h.anvil.provider);
      const answers = await answered;
      expect(await relayerNonce('latest')).toBe(nonceBefore + 1);
      return answers;
    } finally {
      await setAutomine(h.anvil.provider, true);
    }
  }

  /** The buyer's x402 v2 payment for requirements a seller asked for. */
  async function pay(accepted: Record<string, unknown>, resource: unknown): Promise<Record<string, unknown>> {
    const payload = await signTransferAuthorization(testSigner('buyer', h.anvil.provider), {
      chainId: 31337,
      usdcAddress: h.usdcAddress,
      to: String(accepted.payTo),
      valueMicro: BigInt(String(accepted.amount)),
    });
    return { x402Version: 2, resource, accepted, payload };
  }

  it(`gateway.payPerCall('0.05'): ${COPIES} concurrent copies of one PAYMENT-SIGNATURE run the handler once`, async () => {
    const challenge = await fetch(`${sellerUrl}/forecast`);
    expect(challenge.status).toBe(402);
    const required = decode(challenge.headers.get('payment-required')!);
    const header = encode(await pay(required.accepts[0], required.resource));

    const answers = await withCopiesInFlight(() =>
      Array.from({ length: COPIES }, async () => {
        const res = await fetch(`${sellerUrl}/forecast`, { headers: { 'PAYMENT-SIGNATURE': header } });
        return { status: res.status, body: (await res.json()) as { reason?: string } };
      }),
    );
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    for (const refused of answers.filter((a) => a.status !== 200)) {
      expect(refused).toMatchObject({
        status: 402,
        body: { reason: 'invalid_exact_evm_nonce_already_used' },
      });
    }
    expect(handled).toBe(1);

    const replay = await fetch(`${sellerUrl}/forecast`, { headers: { 'PAYMENT-SIGNATURE': header } });
    expect(replay.status).toBe(402);
    expect(handled).toBe(1);
  });

  it(`@paygate/mcp-paywall: ${COPIES} concurrent calls with one x402 payment run the tool once`, async () => {
    let ran = 0;
    const paid = createPaywall({ apiKey: API_KEY, apiBaseUrl: h.gateway.url });
    const quote = paid(
      { tool: 'quote', price: '0.05' },
      async (_args: unknown, _extra: unknown): Promise<ToolResult> => {
        ran += 1;
        return { content: [{ type: 'text' as const, text: 'Money is never lost.' }] };
      },
    );
    const sale = { price: '0.05', resourceUrl: 'mcp://tool/quote', description: 'quote' };
    const required = (await createX402Seller({ apiKey: API_KEY, apiBaseUrl: h.gateway.url }).paymentRequired(
      sale,
    ))!;
    const payment = await pay(required.accepts[0] as unknown as Record<string, unknown>, required.resource);

    const results = await withCopiesInFlight(() =>
      Array.from({ length: COPIES }, () => quote({}, { _meta: { 'x402/payment': payment } })),
    );
    const served = results.filter((r) => !r.isError);
    expect(served).toHaveLength(1);
    expect(served[0]!._meta?.['x402/payment-response']).toMatchObject({ success: true });
    for (const refused of results.filter((r) => r.isError)) {
      expect(refused.structuredContent).toMatchObject({ error: 'invalid_exact_evm_nonce_already_used' });
    }
    expect(ran).toBe(1);
  });
});
