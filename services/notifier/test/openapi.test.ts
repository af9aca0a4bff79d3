import { schemaValidator, servedApiOperations, waitFor } from '@paygate/testing';
import { WEBHOOK_EVENT_TYPES } from '../src/webhooks/payload';
import { type NotifierHarness, startNotifierHarness } from './harness';
import { publish, SELLER_ID, sellerIdentity, sellerUpdated, sessionSnapshot } from './helpers';

const API_KEY = `sk_test_${'7'.repeat(24)}`;
const METHODS = ['get', 'post', 'put', 'patch', 'delete'];

describe('notifier OpenAPI document, built from the route declarations', () => {
  let h: NotifierHarness;
  let doc: any;
  let deliveryId: string;
  const call = (path: string, init: RequestInit & { headers?: Record<string, string> } = {}) =>
    fetch(`${h.url}${path}`, {
      ...init,
      headers: { authorization: `Bearer ${API_KEY}`, ...(init.headers ?? {}) },
    });

  beforeAll(async () => {
    h = await startNotifierHarness('ntapi', {
      secrets: { [SELLER_ID]: { secret: 'whsec_openapi_0123456789', version: 1 } },
      sellers: { [API_KEY]: sellerIdentity(SELLER_ID) },
    });
    doc = await (await fetch(`${h.url}/api/v1/openapi/notifier.json`)).json();
    // A delivery of the seller, so the documented {id} routes can be called with a real one.
    await publish(h.bus, 'seller.updated', 'registry', sellerUpdated({ webhookUrl: h.receiver.url }));
    const list = async () => (await (await call('/api/v1/webhooks/deliveries')).json()).data ?? [];
    await waitFor(
      async () => {
        await publish(h.bus, 'checkout.session_created', 'checkout', sessionSnapshot());
        return (await list()).length > 0;
      },
      { timeoutMs: 20_000, message: 'a webhook delivery for the seller' },
    );
    deliveryId = (await list())[0].id;
  }, 60_000);
  afterAll(() => h?.stop());

  const operations = (): Array<{ method: string; path: string; op: any }> =>
    Object.entries<any>(doc.paths).flatMap(([path, item]) =>
      Object.entries<any>(item)
        .filter(([method]) => METHODS.includes(method))
        .map(([method, op]) => ({ method, path, op })),
    );

  it('documents exactly the routes express serves, with the WebSocket protocol and every webhook it sends', () => {
    expect(doc.openapi).toBe('3.1.0');
    const documented = operations().map(({ method, path }) => `${method} ${path}`);
    const served = servedApiOperations(h.service.app);
    expect(served.length).toBeGreaterThanOrEqual(5);
    expect([...documented].sort()).toEqual([...served].sort());
    for (const { method, path, op } of operations()) {
      const templated = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
      const declared = (op.parameters ?? []).filter((p: any) => p.in === 'path').map((p: any) => p.name);
      expect({ method, path, declared }).toEqual({ method, path, declared: templated });
    }

    const ws = doc.paths['/api/v1/ws'].get;
    for (const word of [
      '"subscribe"',
      '"unsubscribe"',
      '"subscribed"',
      '"session"',
      'too_many_subscriptions',
    ])
      expect(ws.description).toContain(word);
    expect(ws.operationId).toBe('sessionUpdatesWebSocket');
    expect(Object.keys(doc.webhooks).sort()).toEqual([...WEBHOOK_EVENT_TYPES].sort());
    const refund = doc.webhooks['refund.completed'].post.requestBody.content['application/json'].schema;
    expect(refund.properties.data.required).toEqual(
      expect.arrayContaining(['event', 'transactionId', 'refundTxHash', 'amount']),
    );
    // The payload fields docs/api.md lists are the body's own, as well as data's.
    expect(refund.required).toEqual(
      expect.arrayContaining(['event', 'transactionId', 'refundTxHash', 'amount']),
    );
    expect(refund.properties.refundTxHash).toBeDefined();
  });

  it('every documented operation answers through the real service with a documented status and body', async () => {
    const statuses: string[] = [];
    for (const { method, path, op } of operations()) {
      const response = await call(path.replace('{id}', deliveryId), {
        method: method.toUpperCase(),
        ...(method === 'post' ? { headers: { 'idempotency-key': 'openapi-walk' } } : {}),
      });
      const text = await response.text();
      const where = `${method} ${path} → ${response.status} ${text.slice(0, 200)}`;
      statuses.push(`${method} ${path} ${response.status}`);
      const documented = op.responses[String(response.status)];
      expect({ where, documented: documented !== undefined }).toEqual({ where, documented: true });
      const type = response.headers.get('content-type')?.split(';')[0];
      if (type !== 'application/json') continue;
      const schema = documented.content?.['application/json']?.schema;
      expect({ where, schema: schema !== undefined }).toEqual({ where, schema: true });
      const validator = schemaValidator(schema);
      expect({ where, valid: validator(JSON.parse(text)), errors: validator.errors ?? null }).toEqual({
        where,
        valid: true,
        errors: null,
      });
    }
    // The walk reached the real answers, not only refusals.
    expect(statuses).toEqual(
      expect.arrayContaining([
        'get /api/v1/ws 426',
        'get /api/v1/webhooks/deliveries 200',
        'get /api/v1/webhooks/deliveries/{id} 200',
        'post /api/v1/webhooks/deliveries/{id}/redeliver 202',
        'get /api/v1/openapi/notifier.json 200',
      ]),
    );
  });

  it('a query, path or header value breaking a declared rule is a 400 naming the field and the rule', async () => {
    const params = doc.paths['/api/v1/webhooks/deliveries'].get.parameters as Array<{ name: string }>;
    expect(params.map((p) => p.name).sort()).toEqual(['before', 'endpointId', 'eventId', 'limit', 'status']);
    for (const [query, field, rule] of [
      ['limit=101', 'limit', 'must match ^(100|[1-9][0-9]?)$'],
      ['limit=0', 'limit', 'must match ^(100|[1-9][0-9]?)$'],
      ['status=bogus', 'status', 'must be one of pending, delivered, failed'],
      ['before=a%20b', 'before', 'must match ^[0-9A-Za-z_-]{1,64}$'],
      ['endpointId=nope', 'endpointId', 'must match ^whe_[0-9A-Z]{26}$'],
      ['surprise=1', 'surprise', 'is not an allowed field'],
    ] as const) {
      const refused = await call(`/api/v1/webhooks/deliveries?${query}`);
      expect({ query, status: refused.status, error: (await refused.json()).error }).toMatchObject({
        query,
        status: 400,
        error: { code: 'invalid_request', field, rule, message: `${field} ${rule}` },
      });
    }
    for (const good of ['limit=100', 'status=failed', `before=${deliveryId}`])
      expect({ good, status: (await call(`/api/v1/webhooks/deliveries?${good}`)).status }).toEqual({
        good,
        status: 200,
      });
    const badId = await call(`/api/v1/webhooks/deliveries/${'x'.repeat(65)}`);
    expect(badId.status).toBe(400);
    expect((await badId.json()).error).toMatchObject({
      field: 'id',
      rule: 'must match ^[0-9A-Za-z_-]{1,64}$',
    });
    const badKey = await call(`/api/v1/webhooks/deliveries/${deliveryId}/redeliver`, {
      method: 'POST',
      headers: { 'idempotency-key': 'has space' },
    });
    expect(badKey.status).toBe(400);
    expect((await badKey.json()).error).toMatchObject({ field: 'Idempotency-Key' });
  });
});
