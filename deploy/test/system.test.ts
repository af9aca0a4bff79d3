/**
 * The whole system on real parts: anvil with test USDC, the seven services on real Postgres and NATS, behind
 * the edge built from deploy/routes.json. A seller signs up and registers a skill, an agent pays for a call
 * through the edge, the payment reaches the ledger, and the ledger reconciles with the chain.
 */
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAgent } from '@paygate/agent-client';
import { loadConfig as chainIndexerConfig, startChainIndexer } from '@paygate/chain-indexer';
import { loadConfig as checkoutConfig, startCheckout } from '@paygate/checkout';
import { loadConfig as ledgerConfig, startEscrowLedger } from '@paygate/escrow-ledger';
import { loadConfig as gatewayConfig, startGatewayProxy } from '@paygate/gateway-proxy';
import { loadConfig as notifierConfig, startNotifier } from '@paygate/notifier';
import { loadConfig as registryConfig, startRegistry } from '@paygate/registry';
import type { RunningService } from '@paygate/runtime';
import { loadConfig as settlementConfig, startSettlement } from '@paygate/settlement';
import {
  type AnvilInstance,
  createActiveSkill,
  createTestEnvironment,
  deployTestUsdc,
  findFreePort,
  fundTestWallets,
  openSchema,
  signUpSeller,
  startAnvil,
  type TestEnvironment,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { Wallet } from 'ethers';
import express from 'express';
import { sql } from 'kysely';
import { startEdge } from '../dev/edge';
import routeTable from '../routes.json';

const OPERATOR_TOKEN = 'system-test-operator-token-0000';

describe('the whole system behind the edge', () => {
  let env: TestEnvironment;
  let anvil: AnvilInstance;
  let edge: http.Server;
  let upstream: http.Server;
  let baseUrl: string;
  const services: Record<string, RunningService> = {};

  beforeAll(async () => {
    env = await createTestEnvironment('system');
    anvil = await startAnvil();
    const { address: usdcAddress } = await deployTestUsdc(anvil.rpcUrl);
    await fundTestWallets({ rpcUrl: anvil.rpcUrl, usdcAddress, amountMicro: 100_000_000n, roles: ['buyer'] });
    const edgePort = await findFreePort();
    baseUrl = `http://127.0.0.1:${edgePort}`;
    const chain = {
      CHAIN_RPC_URL: anvil.rpcUrl,
      CHAIN_NETWORK: 'local',
      USDC_ADDRESS: usdcAddress,
      ESCROW_ADDRESS: testWallets.escrow.address,
      CONFIRMATIONS: '1',
      PUBLIC_BASE_URL: baseUrl,
      OPERATOR_TOKEN,
    };
    const envFor = (name: string, extra: Record<string, string> = {}) =>
      env.envFor(name, { ...chain, ...extra });
    services.registry = await startRegistry(
      registryConfig(envFor('registry', { VALIDATION_INTERVAL_MS: '200' })),
    );
    services['chain-indexer'] = await startChainIndexer(chainIndexerConfig(envFor('chain-indexer')));
    services['gateway-proxy'] = await startGatewayProxy(gatewayConfig(envFor('gateway-proxy')));
    services.checkout = await startCheckout(checkoutConfig(envFor('checkout')));
    services['escrow-ledger'] = await startEscrowLedger(
      ledgerConfig(envFor('escrow-ledger', { RELEASE_INTERVAL_MS: '200' })),
    );
    services.settlement = await startSettlement(
      settlementConfig(envFor('settlement', { ESCROW_PRIVATE_KEY: testWallets.escrow.privateKey })),
    );
    services.notifier = await startNotifier(notifierConfig(envFor('notifier')));
    edge = await startEdge({
      port: edgePort,
      upstreams: Object.fromEntries(Object.entries(services).map(([name, s]) => [name, s.url])),
    });
    const api = express();
    api.get('/quote', (_req, res) => {
      res.json({ quote: 'Money is never lost.' });
    });
    upstream = await new Promise((resolve) => {
      const server = api.listen(0, '127.0.0.1', () => resolve(server));
    });
  }, 120_000);

  afterAll(async () => {
    await new Promise((r) => edge?.close(r));
    await new Promise((r) => upstream?.close(r));
    for (const service of Object.values(services).reverse()) await service.stop().catch(() => undefined);
    await anvil?.stop();
    await env?.cleanup();
  });

  it('runs all seven services, each healthy, ready, measured, with its migrations in its own schema', async () => {
    expect(Object.keys(services).sort()).toEqual(Object.keys(routeTable.services).sort());
    for (const [name, service] of Object.entries(services)) {
      const health = await fetch(`${service.url}/healthz`);
      expect({ name, status: health.status }).toEqual({ name, status: 200 });
      const ready = await fetch(`${service.url}/readyz`);
      expect({ name, status: ready.status }).toEqual({ name, status: 200 });
      const metrics = await (await fetch(`${service.url}/metrics`)).text();
      expect(metrics).toContain('process_cpu_seconds_total');
      const db = openSchema(env.schemaFor(name));
      const tables = await sql<{ table_name: string }>`
        select table_name from information_schema.tables where table_schema = ${env.schemaFor(name)}`.execute(
        db,
      );
      await db.destroy();
      expect(tables.rows.map((r) => r.table_name)).toEqual(
        expect.arrayContaining(['kysely_migration', 'outbox', 'inbox']),
      );
    }
  });

  it('takes a first paid call through the edge, credits the seller in the ledger, and reconciles with the chain', async () => {
    const seller = await signUpSeller(baseUrl, Wallet.createRandom());
    const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    await createActiveSkill(baseUrl, seller.apiKey, {
      name: 'system-quotes',
      type: 'API',
      apiBaseUrl: upstreamUrl,
      endpoints: [{ path: '/quote', method: 'GET', priceUsdc: '0.25', description: 'A quote' }],
    });
    const paidUrl = `${baseUrl}/api/v1/skills/system-quotes/quote`;
    await waitFor(async () => (await fetch(paidUrl)).status === 402, {
      message: 'gateway never offered the skill',
    });

    const skillMd = await fetch(`${baseUrl}/api/v1/skills/system-quotes/SKILL.md`);
    expect(skillMd.headers.get('content-type')).toContain('text/markdown');

    const agent = createAgent({
      wallet: new Wallet(testWallets.buyer.privateKey, anvil.provider),
      maxPricePerCall: '1',
    });
    const response = await agent.fetch(paidUrl);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ quote: 'Money is never lost.' });
    expect(agent.payments).toHaveLength(1);

    const transactions = await waitFor(
      async () => {
        const r = await fetch(`${baseUrl}/api/v1/transactions`, {
          headers: { authorization: `Bearer ${seller.apiKey}` },
        });
        const body = (await r.json()) as { data?: Array<{ amount: string }> };
        return body.data && body.data.length === 1 ? body.data : undefined;
      },
      { timeoutMs: 20_000, message: 'the payment never reached the ledger' },
    );
    expect(transactions[0]!.amount).toBe('0.25');

    const reconciliation = await fetch(`${baseUrl}/api/v1/reconciliation`, {
      headers: { authorization: `Bearer ${OPERATOR_TOKEN}` },
    });
    expect(reconciliation.status).toBe(200);
    const report = (await reconciliation.json()) as { balanced: boolean; difference: string };
    expect(report).toMatchObject({ balanced: true, difference: '0' });
  });
});
