import { schemaValidator, servedApiOperations, signUpSeller } from '@paygate/testing';
import { Wallet } from 'ethers';
import { SkillCreate } from '../src/skills/schemas';
import { api, type Harness, startHarness } from './helpers';

const OPERATOR_TOKEN = 'openapi-operator-token-0000000000';
const METHODS = ['get', 'post', 'put', 'patch', 'delete'];

let h: Harness;
let doc: any;
let seller: Awaited<ReturnType<typeof signUpSeller>>;
/** Signs out when the test calls sign-out, so the seller whose session the other operations use stays signed in. */
let signingOut: Awaited<ReturnType<typeof signUpSeller>>;
/** Values for the documented path parameters: a skill and endpoint of the seller, a dashboard page. */
let pathValues: Record<string, string>;

beforeAll(async () => {
  h = await startHarness('regoapi', { OPERATOR_TOKEN });
  const response = await api(h.url, 'GET', '/api/v1/openapi.json');
  expect(response.status).toBe(200);
  doc = response.body;
  seller = await signUpSeller(h.url, Wallet.createRandom());
  signingOut = await signUpSeller(h.url, Wallet.createRandom());
  const skill = await api(h.url, 'POST', '/api/v1/manage/skills', {
    token: seller.apiKey,
    body: {
      name: 'openapi-target',
      displayName: 'OpenAPI target',
      description: 'A skill the document test calls.',
      apiBaseUrl: 'http://127.0.0.1:9',
      type: 'API',
      endpoints: [{ path: '/a', method: 'GET', priceUsdc: '0.05' }],
    },
  });
  expect(skill.status).toBe(201);
  pathValues = { name: 'openapi-target', endpointId: skill.body.endpoints[0].endpointId, rest: 'settings' };
}, 60_000);
afterAll(async () => {
  await h?.stop();
});

/** Every documented `method path` with its operation object, in document order. */
function operations(): Array<{ method: string; path: string; op: any }> {
  return Object.entries<any>(doc.paths).flatMap(([path, item]) =>
    Object.entries<any>(item)
      .filter(([method]) => METHODS.includes(method))
      .map(([method, op]) => ({ method, path, op })),
  );
}

/** The bearer token for an operation's first security alternative. */
function tokenFor(op: any, path: string): string | undefined {
  const scheme = Object.keys(op.security?.[0] ?? {})[0];
  if (scheme === undefined) return undefined;
  // Its API key: sign-out ends sessions, not keys, so this works in every test.
  if (path === '/api/v1/auth/sign-out') return signingOut.apiKey;
  if (scheme === 'apiKey' || scheme === 'session') return seller.sessionToken;
  if (scheme === 'operator') return OPERATOR_TOKEN;
  throw new Error(`no credentials for the security scheme ${scheme}`);
}

const concrete = (path: string) => path.replace(/\{([^}]+)\}/g, (_m, name: string) => pathValues[name]!);

describe('the registry OpenAPI document is built from the route declarations', () => {
  it('documents exactly the routes express serves, no more, no fewer', () => {
    expect(doc.openapi).toBe('3.1.0');
    const documented = operations().map(({ method, path }) => `${method} ${path}`);
    // Express 5 wildcards (`*rest`) are written `{rest}` in the document.
    const served = servedApiOperations(h.registry.app).map((op) => op.replace(/\*([A-Za-z_]\w*)/g, '{$1}'));
    expect(served.length).toBeGreaterThanOrEqual(25);
    expect([...documented].sort()).toEqual([...served].sort());
    expect(new Set(documented).size).toBe(documented.length);
  });

  it('declares every path parameter, security scheme and body schema it uses', () => {
    for (const { method, path, op } of operations()) {
      const templated = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
      const declared = (op.parameters ?? []).filter((p: any) => p.in === 'path').map((p: any) => p.name);
      expect({ method, path, declared }).toEqual({ method, path, declared: templated });
      for (const requirement of op.security ?? [])
        for (const scheme of Object.keys(requirement))
          expect(Object.keys(doc.components.securitySchemes)).toContain(scheme);
    }
    const create = doc.paths['/api/v1/manage/skills'].post;
    expect(create.requestBody.content['application/json'].schema).toEqual(
      JSON.parse(JSON.stringify(SkillCreate)),
    );
    expect(create.security).toEqual([{ apiKey: [] }, { session: [] }]);
    expect(create.parameters.map((p: any) => `${p.in}:${p.name}`)).toContain('header:Idempotency-Key');
    expect(doc.paths['/api/v1/operator/skills/{name}/suspend'].post.security).toEqual([{ operator: [] }]);
    expect(doc.paths['/api/v1/operator/skills/{name}/suspend'].post.requestBody.required).toBe(false);
  });

  it('every documented operation answers through the real service with a documented status, type and body', async () => {
    for (const { method, path, op } of operations()) {
      const response = await api(h.url, method.toUpperCase(), concrete(path), {
        token: tokenFor(op, path),
        ...(op.requestBody ? { body: {} } : {}),
      });
      const where = `${method} ${path} → ${response.status} ${response.text.slice(0, 200)}`;
      expect({ where, noRoute: String(response.body?.error?.message).startsWith('no route') }).toEqual({
        where,
        noRoute: false,
      });
      const documented = op.responses[String(response.status)];
      expect({ where, documented: documented !== undefined }).toEqual({ where, documented: true });
      if (response.status >= 300) continue;
      const type = response.headers.get('content-type')!.split(';')[0]!;
      expect({ where, types: Object.keys(documented.content ?? {}) }).toEqual({ where, types: [type] });
      if (type === 'application/json') {
        const validator = schemaValidator(documented.content[type].schema);
        expect({ where, valid: validator(response.body), errors: validator.errors ?? null }).toEqual({
          where,
          valid: true,
          errors: null,
        });
      }
    }
  }, 120_000);

  it('a body or query breaking a declared rule is a 400 naming the field and the rule', async () => {
    const withBodies = operations().filter(
      ({ op }) => op.requestBody?.content['application/json'].schema.additionalProperties === false,
    );
    expect(withBodies.length).toBeGreaterThanOrEqual(15);
    for (const { method, path, op } of withBodies) {
      const response = await api(h.url, method.toUpperCase(), concrete(path), {
        token: tokenFor(op, path),
        body: { notAField: 1 },
      });
      const where = `${method} ${path}`;
      // The first rule broken: a missing required field, else the field that is not allowed.
      const required: string[] = op.requestBody.content['application/json'].schema.required ?? [];
      const error = required.length
        ? { field: required[0], rule: 'is required' }
        : { field: 'notAField', rule: 'is not an allowed field' };
      expect({ where, status: response.status, error: response.body?.error }).toMatchObject({
        where,
        status: 400,
        error: { code: 'invalid_request', ...error, message: `${error.field} ${error.rule}` },
      });
    }

    // A pattern's readable rule is in the document (x-rule) and is the rule the service answers with.
    const nameRule =
      doc.paths['/api/v1/manage/skills'].post.requestBody.content['application/json'].schema.properties.name[
        'x-rule'
      ];
    expect(nameRule).toMatch(/kebab-case/);
    // (The walk above rotated the API key: the session still works.)
    const badName = await api(h.url, 'POST', '/api/v1/manage/skills', {
      token: seller.sessionToken,
      body: {
        name: 'Not_Kebab',
        displayName: 'x',
        description: 'Long enough description.',
        apiBaseUrl: 'http://127.0.0.1:9',
        type: 'API',
      },
    });
    expect(badName.status).toBe(400);
    expect(badName.body.error).toMatchObject({ field: 'name', rule: nameRule });

    const limit = doc.paths['/api/v1/skills'].get.parameters.find((p: any) => p.name === 'limit');
    expect(limit.schema['x-rule']).toBe('must be an integer from 1 to 100');
    for (const path of ['/api/v1/skills', '/api/v1/manage/skills']) {
      const refused = await api(h.url, 'GET', `${path}?limit=0`, { token: seller.sessionToken });
      expect({ path, status: refused.status, error: refused.body.error }).toMatchObject({
        path,
        status: 400,
        error: { field: 'limit', rule: limit.schema['x-rule'] },
      });
    }
  });
});
