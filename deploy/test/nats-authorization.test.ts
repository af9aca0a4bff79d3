/**
 * The whole system with every service on its own NATS user: the suite runs its own nats-server with the users
 * generated from the contracts (libs/bus permissions.ts), and the seven services connect with NATS_USER and
 * NATS_PASSWORD. A paid call (the registry resolves the seller's key and hands the gateway its forwarding key) and
 * a signed webhook (the registry hands the notifier the webhook secret) go through; a client without a user, or
 * a service's user asking for what is not its own, is refused by the server.
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
import { ADMIN_USER, type Bus, connectBus, requestRpc } from '@paygate/bus';
import { verifyWebhook, WEBHOOK_SIGNATURE_HEADER } from '@paygate/gateway-middleware';
import { createActiveSkill, signUpSeller, testWallets, waitFor } from '@paygate/testing';
import { Wallet } from 'ethers';
import express from 'express';
import { connect } from 'nats';
import { startEdge } from '../dev/edge';
import { type AllServices, startAllServices } from './all-services';

const OPERATOR_TOKEN = 'nats-authorization-operator-token-0';
const PERMISSION_VIOLATION = /permissions violation/i;

describe('every service on its own NATS user (authorizing nats-server)', () => {
  let all: AllServices;
  let edge: http.Server;
  let upstream: http.Server;
  let baseUrl: string;
  const upstreamSaw: http.IncomingHttpHeaders[] = [];
  const webhooks: Array<{ body: string; signature: string | undefined }> = [];
  const buses: Bus[] = [];

  const busAs = async (user: string) => {
    const bus = await connectBus({
      url: all.nats!.url,
      namespace: all.env.namespace,
      name: `test-${user}`,
      user,
      password: all.nats!.passwords[user as keyof NonNullable<AllServices['nats']>['passwords']],
    });
    buses.push(bus);
    return bus;
  };

  beforeAll(async () => {
    // The edge first, on a port the OS picks (the services need its URL); it learns their URLs once they run.
    const upstreams: Record<string, string> = {};
    edge = await startEdge({ port: 0, upstreams });
    baseUrl = `http://127.0.0.1:${(edge.address() as AddressInfo).port}`;
    all = await startAllServices({
      label: 'natsauth',
      operatorToken: OPERATOR_TOKEN,
      publicBaseUrl: baseUrl,
      authorizedNats: true,
      extra: { notifier: { WEBHOOK_POLL_INTERVAL_MS: '100' } },
    });
    Object.assign(
      upstreams,
      Object.fromEntries(Object.entries(all.services).map(([name, s]) => [name, s.url])),
    );
    const api = express();
    api.get('/quote', (req, res) => {
      upstreamSaw.push(req.headers);
      res.json({ quote: 'Only the ledger moves money.' });
    });
    api.post('/hooks', express.text({ type: '*/*' }), (req, res) => {
      webhooks.push({ body: req.body as string, signature: req.header(WEBHOOK_SIGNATURE_HEADER) });
      res.status(204).end();
    });
    upstream = await new Promise((resolve) => {
      const server = api.listen(0, '127.0.0.1', () => resolve(server));
    });
  }, 180_000);

  afterAll(async () => {
    for (const bus of buses) await bus.close().catch(() => undefined);
    await new Promise((r) => edge?.close(r));
    await new Promise((r) => upstream?.close(r));
    await all?.stop();
  });

  it('runs the seven services ready, each connected as its own user', async () => {
    for (const [name, service] of Object.entries(all.services)) {
      const ready = await fetch(`${service.url}/readyz`);
      expect({ name, status: ready.status }).toEqual({ name, status: 200 });
      expect(service.ctx.config.natsCredentials?.user).toBe(name);
    }
  });

  it('takes a paid call (API key resolved, forward signed with the registry’s key) and signs its webhook', async () => {
    const seller = await signUpSeller(baseUrl, Wallet.createRandom());
    const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    const account = await fetch(`${baseUrl}/api/v1/account`, {
      method: 'PATCH',
      // The webhook URL is the account wallet's to change: its session, never the sk_ key alone.
      headers: { authorization: `Bearer ${seller.sessionToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ webhookUrl: `${upstreamUrl}/hooks` }),
    });
    expect(account.status).toBe(200);
    const { webhookSecret } = (await account.json()) as { webhookSecret: string };
    await createActiveSkill(baseUrl, seller.apiKey, {
      name: 'natsauth-quotes',
      type: 'API',
      apiBaseUrl: upstreamUrl,
      endpoints: [{ path: '/quote', method: 'GET', priceUsdc: '0.25', description: 'A quote' }],
    });
    const paidUrl = `${baseUrl}/api/v1/skills/natsauth-quotes/quote`;
    await waitFor(async () => (await fetch(paidUrl)).status === 402, {
      message: 'gateway never offered the skill',
    });
    const agent = createAgent({
      wallet: new Wallet(testWallets.buyer.privateKey, all.anvil.provider),
      maxPricePerCall: '1',
    });
    const response = await agent.fetch(paidUrl);
    expect(response.status).toBe(200);
    // The gateway signed the forward with the key the registry sealed for it (registry.forwarding_key).
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

    // The ledger resolved the sk_ key through the registry (registry.resolve_api_key) and shows the payment.
    await waitFor(
      async () => {
        const r = await fetch(`${baseUrl}/api/v1/transactions`, {
          headers: { authorization: `Bearer ${seller.apiKey}` },
        });
        const body = (await r.json()) as { data?: Array<{ amount: string }> };
        return body.data?.length === 1 && body.data[0]!.amount === '0.25';
      },
      { timeoutMs: 30_000, message: 'the payment never reached the ledger' },
    );
    // The notifier signed the payment.confirmed webhook with the secret the registry sealed for it.
    const webhook = await waitFor(
      () =>
        webhooks.find((hook) => (JSON.parse(hook.body) as { event?: string }).event === 'payment.confirmed'),
      { timeoutMs: 30_000, message: 'no payment.confirmed webhook arrived' },
    );
    expect(() =>
      verifyWebhook({ payload: webhook.body, header: webhook.signature, secret: webhookSecret }),
    ).not.toThrow();
    // Nothing any service did on the way was refused: its permissions cover all it does.
    expect(all.nats!.serverLog().match(/.*violation.*/gi) ?? []).toEqual([]);
  }, 120_000);

  it('refuses a client without a user, and a service’s user the secrets and money subjects that are not its own', async () => {
    await expect(connect({ servers: all.nats!.url, timeout: 3000, maxReconnectAttempts: 0 })).rejects.toThrow(
      /authorization violation/i,
    );

    const indexer = await busAs('chain-indexer');
    const checkout = await busAs('checkout');
    const refused = (promise: Promise<unknown>) =>
      promise.then(
        () => 'answered',
        (error: Error) => error.message,
      );
    const sellerId = 'sel_01JAAAAAAAAAAAAAAAAAAAAAAA';
    expect(
      await refused(requestRpc(indexer, 'registry.webhook_secret', { sellerId }, { timeoutMs: 2000 })),
    ).toMatch(PERMISSION_VIOLATION);
    expect(
      await refused(requestRpc(checkout, 'registry.webhook_secret', { sellerId }, { timeoutMs: 2000 })),
    ).toMatch(PERMISSION_VIOLATION);
    expect(
      await refused(requestRpc(checkout, 'registry.forwarding_key', { sellerId }, { timeoutMs: 2000 })),
    ).toMatch(PERMISSION_VIOLATION);
    expect(
      await refused(
        requestRpc(
          indexer,
          'registry.resolve_api_key',
          { apiKey: `sk_${'x'.repeat(32)}` },
          { timeoutMs: 2000 },
        ),
      ),
    ).toMatch(PERMISSION_VIOLATION);

    // A forged refund.initiated (settlement would pay it from escrow) is refused to every user but the ledger's.
    // (The server refuses it before anyone reads it; the shape is what the ledger would publish.)
    const forged = new TextEncoder().encode(
      JSON.stringify({
        id: '01JAAAAAAAAAAAAAAAAAAAAAAA',
        type: 'refund.initiated',
        version: 1,
        producer: 'escrow-ledger',
        occurredAt: new Date().toISOString(),
        data: {
          refundId: 'ref_forged',
          transactionId: null,
          sellerId: null,
          payer: `0x${'66'.repeat(20)}`,
          amount: '50',
          chainId: 31337,
          initiatedAt: new Date().toISOString(),
        },
      }),
    );
    for (const user of ['checkout', 'chain-indexer', 'gateway-proxy', 'settlement', 'notifier', 'registry']) {
      const bus = await busAs(user);
      const outcome = await refused(
        bus.js.publish(bus.subjectFor('refund.initiated'), forged, { timeout: 2000 }),
      );
      expect({ user, outcome }).toEqual({ user, outcome: expect.stringMatching(PERMISSION_VIOLATION) });
    }
    const admin = await busAs(ADMIN_USER);
    const info = await admin.jsm.streams.info(admin.eventsStream, { subjects_filter: '>' } as never);
    expect(Object.keys(info.state.subjects ?? {})).not.toContain(admin.subjectFor('refund.initiated'));
    // The server logs each refusal with the user (what the previous test's empty log check relies on).
    expect(all.nats!.serverLog()).toMatch(/"checkout".*Publish Violation|Publish Violation.*checkout/i);
  });
});
