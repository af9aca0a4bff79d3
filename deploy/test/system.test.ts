/**
 * The whole system on real parts: anvil with test USDC, the seven services on real Postgres and NATS, behind
 * the edge built from deploy/routes.json. A seller signs up and registers a skill, an agent pays for a call
 * through the edge, the payment reaches the ledger, and the ledger reconciles with the chain.
 */
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  createAgent,
  EMPTY_BODY_SHA256,
  forwardingKeyFromApiKey,
  forwardingSignature,
  parseRequestSignature,
  requestSigningPayload,
} from '@paygate/agent-client';
import { createActiveSkill, openSchema, signUpSeller, testWallets, waitFor } from '@paygate/testing';
import { Wallet } from 'ethers';
import express from 'express';
import { sql } from 'kysely';
import { startEdge } from '../dev/edge';
import routeTable from '../routes.json';
import { type AllServices, startAllServices } from './all-services';

const OPERATOR_TOKEN = 'system-test-operator-token-0000';

describe('the whole system behind the edge', () => {
  let all: AllServices;
  let edge: http.Server;
  let upstream: http.Server;
  const upstreamSaw: http.IncomingHttpHeaders[] = [];
  let baseUrl: string;
  let services: AllServices['services'];

  beforeAll(async () => {
    // The edge first, on a port the OS picks (the services need its URL); it learns their URLs once they run.
    const upstreams: Record<string, string> = {};
    edge = await startEdge({ port: 0, upstreams });
    baseUrl = `http://127.0.0.1:${(edge.address() as AddressInfo).port}`;
    all = await startAllServices({ label: 'system', operatorToken: OPERATOR_TOKEN, publicBaseUrl: baseUrl });
    services = all.services;
    Object.assign(upstreams, Object.fromEntries(Object.entries(services).map(([name, s]) => [name, s.url])));
    const api = express();
    api.get('/quote', (req, res) => {
      upstreamSaw.push(req.headers);
      res.json({ quote: 'Money is never lost.' });
    });
    upstream = await new Promise((resolve) => {
      const server = api.listen(0, '127.0.0.1', () => resolve(server));
    });
  }, 120_000);

  afterAll(async () => {
    await new Promise((r) => edge?.close(r));
    await new Promise((r) => upstream?.close(r));
    await all?.stop();
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
      const db = openSchema(all.env.schemaFor(name));
      const tables = await sql<{ table_name: string }>`
        select table_name from information_schema.tables where table_schema = ${all.env.schemaFor(name)}`.execute(
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
      wallet: new Wallet(testWallets.buyer.privateKey, all.anvil.provider),
      maxPricePerCall: '1',
    });
    const response = await agent.fetch(paidUrl);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ quote: 'Money is never lost.' });
    expect(agent.payments).toHaveLength(1);
    // The forward was signed with the key derived from the seller's secret key (the registry → gateway path).
    const seen = upstreamSaw.at(-1)!;
    const signature = parseRequestSignature(seen['x-paygate-signature'] as string)!;
    expect(signature.kid).toBe('sk');
    const payload = requestSigningPayload({
      ...signature,
      method: 'GET',
      pathAndQuery: '/quote',
      bodySha256: EMPTY_BODY_SHA256,
      skill: seen['x-paygate-skill'] as string,
      txHash: seen['x-paygate-tx-hash'] as string,
      payer: seen['x-paygate-payer'] as string,
      amount: seen['x-paygate-amount'] as string,
    });
    expect(signature.signature).toBe(forwardingSignature(forwardingKeyFromApiKey(seller.apiKey), payload));

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
