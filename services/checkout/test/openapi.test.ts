import { CheckoutSessionSnapshot } from '@paygate/contracts';
import { plainSchema } from '@paygate/http';
import { expectApiContract } from '@paygate/testing';
import { PublishableSessionBody, SecretSessionBody } from '../src/sessions/schemas';
import { type CheckoutHarness, publishSkill, skillEvent, startHarness } from './helpers';

/**
 * Checkout's routes are declared once (defineRoute): express serves them with their validation and the OpenAPI
 * document at /api/v1/openapi/checkout.json is built from the same declarations.
 */
describe('checkout routes and their OpenAPI document', () => {
  let h: CheckoutHarness;
  let doc: any;
  beforeAll(async () => {
    h = await startHarness('coapi');
    await publishSkill(h, skillEvent(h, { name: 'doc-skill' }, ['5']));
    const res = await fetch(`${h.url}/api/v1/openapi/checkout.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    doc = await res.json();
  });
  afterAll(() => h.stop());

  it('lists exactly the routes express serves; each answers a documented status; broken rules are 400s naming field and rule', async () => {
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
    await expectApiContract({
      url: h.url,
      app: h.service.app,
      document: doc,
      credentials: {
        publishableKey: h.publishableKey,
        secretKey: h.secretKey,
        operatorToken: 'dev-operator-token',
      },
      pathValue: (path) => (path.includes('/transfers/') ? `tr_${'0'.repeat(24)}` : `cs_${'0'.repeat(32)}`),
    });
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        '/api/v1/checkout/sessions',
        '/api/v1/checkout/sessions/{id}',
        '/api/v1/operator/transfers',
        '/api/v1/operator/transfers/{id}/attach',
        '/api/v1/operator/transfers/{id}/refund',
        '/api/v1/openapi/checkout.json',
        '/static/paygate-checkout.js',
        '/static/paygate-checkout.mjs',
      ]),
    );
  });

  it('documents the schemas that validate, including both bodies of session creation (the key picks one)', async () => {
    const create = doc.paths['/api/v1/checkout/sessions'].post;
    expect(create.operationId).toBe('createCheckoutSession');
    expect(create.security).toEqual([{ publishableKey: [] }, { secretKey: [] }]);
    expect(create.parameters.map((p: any) => p.name)).toEqual(['Idempotency-Key']);
    const body = create.requestBody.content['application/json'].schema;
    expect(body.oneOf).toEqual([plainSchema(PublishableSessionBody), plainSchema(SecretSessionBody)]);
    expect(create.responses['201'].content['application/json'].schema).toEqual(
      plainSchema(CheckoutSessionSnapshot),
    );
    expect(Object.keys(create.responses).sort()).toEqual([
      '200',
      '201',
      '400',
      '401',
      '404',
      '409',
      '429',
      '503',
    ]);

    // The handler validates with those same schemas, each after its key, on both transports (the widget's
    // requests are answered by the fast path ahead of express).
    const post = (key: string, sent: unknown) =>
      fetch(`${h.url}/api/v1/checkout/sessions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(sent),
      }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }));
    const widget = await post(h.publishableKey, { skill: 'doc-skill', amount: '0.01' });
    expect(widget.status).toBe(400);
    expect(widget.body.error).toMatchObject({ field: 'amount', rule: 'is not an allowed field' });
    const badSkill = await post(h.publishableKey, { skill: 'Not A Skill' });
    expect(badSkill.status).toBe(400);
    expect(badSkill.body.error).toMatchObject({
      field: 'skill',
      rule: 'must match ^[a-z0-9]+(-[a-z0-9]+)*$',
    });
    const server = await post(h.secretKey, { amount: '1', description: 'x', holdPeriodHours: 169 });
    expect(server.status).toBe(400);
    expect(server.body.error).toMatchObject({ field: 'holdPeriodHours', rule: 'must be <= 168' });
    const created = await post(h.publishableKey, { skill: 'doc-skill' });
    expect(created.status).toBe(201);

    // Path and query rules come from the declarations too.
    const badId = await fetch(`${h.url}/api/v1/checkout/sessions/cs_nope`);
    expect(badId.status).toBe(400);
    expect(((await badId.json()) as any).error).toMatchObject({
      field: 'id',
      rule: 'must match ^cs_[0-9a-f]{32}$',
    });
    const polled = await fetch(`${h.url}/api/v1/checkout/sessions/${created.body.sessionId}`);
    expect(polled.status).toBe(200);
    const badStatus = await fetch(`${h.url}/api/v1/operator/transfers?status=lost`, {
      headers: { authorization: 'Bearer dev-operator-token' },
    });
    expect(badStatus.status).toBe(400);
    expect(((await badStatus.json()) as any).error.field).toBe('status');
    const attach = doc.paths['/api/v1/operator/transfers/{id}/attach'].post;
    expect(attach.security).toEqual([{ operatorToken: [] }]);
    expect(attach.parameters).toEqual([
      expect.objectContaining({
        name: 'id',
        in: 'path',
        required: true,
        schema: { type: 'string', pattern: '^tr_[0-9a-f]{24}$' },
      }),
    ]);
    expect(doc.paths['/api/v1/operator/transfers/{id}/refund'].post.requestBody.required).toBe(false);
  });
});
