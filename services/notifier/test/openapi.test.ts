import type { Bus } from '@paygate/bus';
import { assertValid } from '@paygate/http';
import {
  createTestEnvironment,
  servedApiOperations,
  serveSellersForTests,
  type TestEnvironment,
} from '@paygate/testing';
import { loadConfig, type RunningNotifier, startNotifier } from '../src';
import { WEBHOOK_EVENT_TYPES } from '../src/webhooks/payload';

const API_KEY = `sk_test_${'7'.repeat(24)}`;

describe('notifier OpenAPI document', () => {
  let env: TestEnvironment;
  let bus: Bus;
  let notifier: RunningNotifier;
  let responder: { stop(): Promise<void> } | undefined;
  beforeAll(async () => {
    env = await createTestEnvironment('ntapi');
    bus = await env.bus();
    responder = await serveSellersForTests(bus, {
      [API_KEY]: {
        sellerId: 'sel_openapi',
        walletAddress: `0x${'1'.repeat(40)}`,
        payoutAddress: `0x${'1'.repeat(40)}`,
        publishableKey: `pk_test_${'7'.repeat(24)}`,
        apiKeyVersion: 1,
      },
    });
    notifier = await startNotifier(loadConfig(env.envFor('notifier')));
  });
  afterAll(async () => {
    await responder?.stop();
    await notifier?.stop();
    await env.cleanup();
  });

  it('is OpenAPI 3.1 with every route, the WebSocket protocol and every webhook it sends', async () => {
    const res = await fetch(`${notifier.url}/api/v1/openapi/notifier.json`);
    expect(res.status).toBe(200);
    const doc = (await res.json()) as any;
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
    const documented = Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.keys(item as object).map((method) => `${method} ${path}`),
    );
    const served = servedApiOperations(notifier.app);
    expect(served.length).toBeGreaterThanOrEqual(5);
    expect([...served].sort()).toEqual([...documented].sort());

    const ws = doc.paths['/api/v1/ws'].get;
    for (const word of [
      '"subscribe"',
      '"unsubscribe"',
      '"subscribed"',
      '"session"',
      'too_many_subscriptions',
    ])
      expect(ws.description).toContain(word);
    expect(Object.keys(doc.webhooks).sort()).toEqual([...WEBHOOK_EVENT_TYPES].sort());
    const refund = doc.webhooks['refund.completed'].post.requestBody.content['application/json'].schema;
    expect(refund.properties.data.required).toEqual(
      expect.arrayContaining(['event', 'transactionId', 'refundTxHash', 'amount']),
    );
    // SPEC's fields are the body's own, as well as data's.
    expect(refund.required).toEqual(
      expect.arrayContaining(['event', 'transactionId', 'refundTxHash', 'amount']),
    );
    expect(refund.properties.refundTxHash).toBeDefined();
  });

  it('documents the query rules the delivery list enforces', async () => {
    const doc = (await (await fetch(`${notifier.url}/api/v1/openapi/notifier.json`)).json()) as any;
    const params = doc.paths['/api/v1/webhooks/deliveries'].get.parameters as Array<{
      name: string;
      schema: object;
    }>;
    const valid = (schema: object, value: string) => {
      try {
        assertValid(schema as never, value);
        return true;
      } catch {
        return false;
      }
    };
    for (const [name, bad, good] of [
      ['limit', '101', '100'],
      ['status', 'bogus', 'failed'],
    ] as const) {
      const schema = params.find((p) => p.name === name)!.schema;
      expect(valid(schema, bad)).toBe(false);
      expect(valid(schema, good)).toBe(true);
      const refused = await fetch(`${notifier.url}/api/v1/webhooks/deliveries?${name}=${bad}`, {
        headers: { authorization: `Bearer ${API_KEY}` },
      });
      expect(refused.status).toBe(400);
      const accepted = await fetch(`${notifier.url}/api/v1/webhooks/deliveries?${name}=${good}`, {
        headers: { authorization: `Bearer ${API_KEY}` },
      });
      expect(accepted.status).toBe(200);
    }
  });
});
