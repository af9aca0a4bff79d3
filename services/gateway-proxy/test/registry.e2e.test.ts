import { createAgent, SpendingLimitError } from '@paygate/agent-client';
import { createGateway } from '@paygate/gateway-middleware';
import { loadConfig as loadRegistryConfig, startRegistry } from '@paygate/registry';
import type { RunningService } from '@paygate/runtime';
import { countStreamMessages, createActiveSkill, signUpSeller, testWallets, waitFor } from '@paygate/testing';
import { Wallet } from 'ethers';
import express from 'express';
import { type Harness, startHarness, startUpstream } from './harness';

jest.setTimeout(60_000);

/** End to end with the real registry: sign-up, skill validation, skill.updated, API-key RPC, agent payment. */
describe('gateway-proxy with the real registry', () => {
  let h: Harness;
  let registry: RunningService;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;

  beforeAll(async () => {
    h = await startHarness('gwe2e');
    registry = await startRegistry(
      loadRegistryConfig(
        h.env.envFor('registry', { PUBLIC_BASE_URL: 'http://paygate.test', VALIDATION_INTERVAL_MS: '200' }),
      ),
    );
    upstream = await startUpstream();
  });
  afterAll(async () => {
    await upstream?.close();
    await registry?.stop();
    await h?.close();
  });

  it('sells a registered skill to an agent and credits the registered seller; the middleware verifies with the real key', async () => {
    const seller = await signUpSeller(registry.url, testWallets.seller.privateKey);
    await createActiveSkill(registry.url, seller.apiKey, {
      name: 'e2e-weather',
      apiBaseUrl: `${upstream.url}/seller`,
      endpoints: [{ path: '/data', method: 'GET', priceUsdc: '0.05', description: 'Weather data' }],
    });
    const skillUrl = `${h.gateway.url}/api/v1/skills/e2e-weather/data`;
    await waitFor(async () => (await fetch(skillUrl)).status === 402, {
      timeoutMs: 15_000,
      message: 'skill projected',
    });

    // An agent whose limit is below the price pays nothing.
    const frugal = createAgent({
      wallet: new Wallet(testWallets.buyer.privateKey, h.anvil.provider),
      maxPricePerCall: '0.01',
    });
    await expect(frugal.fetch(skillUrl)).rejects.toBeInstanceOf(SpendingLimitError);
    expect(frugal.spent).toBe('0');

    const agent = createAgent({
      wallet: new Wallet(testWallets.buyer.privateKey, h.anvil.provider),
      maxPricePerCall: '0.10',
      maxTotalSpend: '0.05',
    });
    const res = await agent.fetch(`${skillUrl}?city=paris`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ ok: true, url: '/seller/data?city=paris' });
    expect(agent.spent).toBe('0.05');
    // The total limit now stops a second purchase.
    await expect(agent.fetch(skillUrl)).rejects.toBeInstanceOf(SpendingLimitError);

    const txHash = agent.payments[0]!.txHash.toLowerCase();
    const events = await waitFor(async () => {
      const found = (await countStreamMessages(h.bus, 'payment.confirmed')).filter(
        (e) => (e.data as { txHash: string }).txHash === txHash,
      );
      return found.length > 0 ? found : undefined;
    });
    expect(events[0]!.data).toMatchObject({
      sellerId: seller.sellerId,
      skillName: 'e2e-weather',
      amount: '0.05',
    });

    // The seller middleware, authenticated by the registry's real key resolution.
    const gateway = createGateway({ apiKey: seller.apiKey, apiBaseUrl: h.gateway.url });
    const app = express();
    app.get('/report', gateway.service({ price: '0.05' }), (req, res) => res.json(req.x402));
    const server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    const sellerUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    const buyer = createAgent({
      wallet: new Wallet(testWallets.buyer.privateKey, h.anvil.provider),
      maxPricePerCall: '0.05',
    });
    const paid = await buyer.fetch(`${sellerUrl}/report`);
    expect(paid.status).toBe(200);
    expect(await paid.json()).toMatchObject({
      type: 'service',
      amount: '0.05',
      payer: testWallets.buyer.address,
    });
    server.close();
  });
});
