import { createAgent, SpendingLimitError } from '@paygate/agent-client';
import { createGateway } from '@paygate/gateway-middleware';
import { loadConfig as loadRegistryConfig, startRegistry } from '@paygate/registry';
import type { StartedService } from '@paygate/runtime';
import { createActiveSkill, signUpSeller, testWallets, waitFor } from '@paygate/testing';
import { Wallet } from 'ethers';
import express from 'express';
import { type Harness, startHarness, startUpstream } from './harness';

jest.setTimeout(60_000);

/** End to end with the real registry: sign-up, skill validation, skill.updated, API-key RPC, agent payment. */
describe('gateway-proxy with the real registry', () => {
  let h: Harness;
  let registry: StartedService;
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
    await h?.stop();
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
    // Two payments at once with room for one: the second is refused before the first has sent anything (the
    // amount was reserved only after an await, and both transfers went out).
    const racing = createAgent({
      wallet: new Wallet(testWallets.buyer.privateKey, h.anvil.provider),
      maxPricePerCall: '0.10',
      maxTotalSpend: '0.05',
    });
    const requirements = await (await fetch(skillUrl)).json();
    const outcomes = await Promise.allSettled([
      racing.pay(skillUrl, requirements),
      racing.pay(skillUrl, requirements),
    ]);
    expect(outcomes.filter((o) => o.status === 'fulfilled').map((o) => o.value.amount)).toEqual(['0.05']);
    expect(outcomes.filter((o) => o.status === 'rejected').map((o) => o.reason)).toEqual([
      expect.any(SpendingLimitError),
    ]);
    expect(racing.payments).toHaveLength(1);
    expect(racing.spent).toBe('0.05');

    const txHash = agent.payments[0]!.txHash.toLowerCase();
    // Booked by the ledger with the gateway's claim, before the call was served.
    const events = h.ledgerPayments(txHash).map((data) => ({ data }));
    expect(events).toHaveLength(1);
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
  it('sells endpoints with :param paths: registered and priced in the registry, matched by the gateway (static first), shown in SKILL.md', async () => {
    const seller = await signUpSeller(registry.url, Wallet.createRandom());
    const manage = (path: string, method: string, body: unknown) =>
      fetch(`${registry.url}/api/v1/manage/skills${path}`, {
        method,
        headers: { authorization: `Bearer ${seller.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const skill = {
      name: 'e2e-users',
      apiBaseUrl: `${upstream.url}/seller`,
      endpoints: [
        { path: '/users/:id', method: 'GET' as const, priceUsdc: '0.02', description: 'One user' },
        { path: '/users/me', method: 'GET' as const, priceUsdc: '0.03', description: 'The caller' },
        {
          path: '/users/:id/posts/:postId',
          method: 'GET' as const,
          priceUsdc: '0.04',
          description: 'A post',
        },
      ],
    };
    // Two paths matching the same URLs for one method are refused, naming the field and the rule.
    const ambiguous = await manage('', 'POST', {
      ...skill,
      displayName: 'Users',
      description: 'Users and their posts',
      type: 'API',
      mode: 'PROXY',
      endpoints: [...skill.endpoints, { path: '/users/:name', method: 'GET', priceUsdc: '0.01' }],
    });
    expect(ambiguous.status).toBe(400);
    expect((await ambiguous.json()).error).toMatchObject({
      field: 'endpoints.3.path',
      rule: expect.stringContaining('must not match the same URLs as GET /users/:id'),
    });
    await createActiveSkill(registry.url, seller.apiKey, skill);
    const badParam = await manage('/e2e-users/endpoints', 'POST', {
      path: '/users/:id/:id',
      method: 'GET',
      priceUsdc: '0.01',
    });
    expect(badParam.status).toBe(400);
    expect((await badParam.json()).error).toMatchObject({
      field: 'path',
      rule: 'must not name the parameter :id twice',
    });
    const twin = await manage('/e2e-users/endpoints', 'POST', {
      path: '/users/:uid',
      method: 'GET',
      priceUsdc: '0.01',
    });
    expect(twin.status).toBe(400);
    expect((await twin.json()).error.field).toBe('path');

    const skillUrl = (path: string) => `${h.gateway.url}/api/v1/skills/e2e-users${path}`;
    await waitFor(async () => (await fetch(skillUrl('/users/42'))).status === 402, {
      timeoutMs: 15_000,
      message: 'skill projected',
    });
    // Each URL is priced by the endpoint it matches; a static segment wins over a parameter.
    const challenge = async (path: string) => {
      const res = await fetch(skillUrl(path));
      return { status: res.status, body: await res.json() };
    };
    expect(await challenge('/users/42')).toMatchObject({
      status: 402,
      body: {
        price: '0.02',
        endpoint: { path: '/users/:id' },
        resource: 'GET http://paygate.test/api/v1/skills/e2e-users/users/42',
      },
    });
    expect(await challenge('/users/me')).toMatchObject({
      status: 402,
      body: { price: '0.03', endpoint: { path: '/users/me' } },
    });
    expect(await challenge('/users/42/posts/7')).toMatchObject({ status: 402, body: { price: '0.04' } });
    for (const unmatched of ['/users', '/users/42/posts', '/users/42/extra', '/users/..', '/users/%2E%2e'])
      expect((await challenge(unmatched)).status).toBe(404);

    // A paid call reaches the seller at the parameter's value.
    const agent = createAgent({
      wallet: new Wallet(testWallets.buyer.privateKey, h.anvil.provider),
      maxPricePerCall: '0.05',
    });
    const paid = await agent.fetch(skillUrl('/users/42/posts/7?full=1'));
    expect(paid.status).toBe(200);
    expect(await paid.json()).toMatchObject({ ok: true, url: '/seller/users/42/posts/7?full=1' });
    expect(agent.spent).toBe('0.04');

    const skillMd = await (await fetch(`${registry.url}/api/v1/skills/e2e-users/SKILL.md`)).text();
    expect(skillMd).toContain('### GET /users/:id — $0.02');
    expect(skillMd).toContain('Path parameters: `id`, `postId`');
    expect(skillMd).toContain(
      'Example: `GET http://paygate.test/api/v1/skills/e2e-users/users/id-1/posts/postId-2`',
    );
  });
});
