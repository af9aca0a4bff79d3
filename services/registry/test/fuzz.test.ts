import { assertValid } from '@paygate/http';
import { createActiveSkill, openSchema, signUpSeller } from '@paygate/testing';
import type { TSchema } from '@sinclair/typebox';
import { Wallet } from 'ethers';
import fc from 'fast-check';
import type { Kysely } from 'kysely';
import { AccountPatch, VerifyRequest } from '../src/accounts/schemas';
import { EmptyBody } from '../src/shared/schema';
import {
  EndpointCreate,
  EndpointPatch,
  SkillCreate,
  SkillMdReplace,
  SkillPatch,
  SuspendBody,
} from '../src/skills/schemas';
import { type Harness, startHarness, startSellerApi } from './helpers';

/**
 * Throws thousands of malformed requests at every registry route (with valid credentials, so they reach
 * validation) and checks: never a 5xx, and the stored sellers, skills, endpoints and idempotency records
 * are exactly as before.
 */
let h: Harness;
let db: Kysely<any>;
let sellerApi: Awaited<ReturnType<typeof startSellerApi>>;
let apiKey: string;
let endpointId: string;
const OPERATOR_TOKEN = 'fuzz-operator-token-000000000000';

beforeAll(async () => {
  h = await startHarness('regfuzz', { HEALTH_INTERVAL_MS: '3600000', OPERATOR_TOKEN });
  db = openSchema(h.env.schemaFor('registry'));
  sellerApi = await startSellerApi();
  const seller = await signUpSeller(h.url, Wallet.createRandom());
  apiKey = seller.apiKey;
  const skill = await createActiveSkill(h.url, apiKey, {
    name: 'fuzz-target',
    apiBaseUrl: sellerApi.url,
    endpoints: [{ path: '/a', method: 'GET', priceUsdc: '0.5', description: 'a' }],
  });
  endpointId = skill.endpoints[0]!.endpointId;
}, 60_000);
afterAll(async () => {
  await db?.destroy();
  await sellerApi?.close();
  await h?.stop();
});

// Columns the background health pinger and validation lease touch on their own.
const VOLATILE = new Set(['health_checked_at', 'validation_lease_until']);
async function snapshot(): Promise<string> {
  const tables: Record<string, unknown[]> = {};
  for (const table of ['sellers', 'skills', 'endpoints', 'idempotency_keys']) {
    tables[table] = await db
      .selectFrom(table)
      .selectAll()
      .orderBy(table === 'idempotency_keys' ? 'key' : 'id')
      .execute();
  }
  return JSON.stringify(tables, (key, value) =>
    VOLATILE.has(key) ? undefined : typeof value === 'bigint' ? String(value) : value,
  );
}

const isInvalid = (schema: TSchema) => (value: unknown) => {
  try {
    assertValid(schema, value);
    return false;
  } catch {
    return true;
  }
};

const weird = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  fc.string({ unit: 'binary', maxLength: 80 }),
  fc.constantFrom(
    '',
    ' ',
    '0x',
    '-1',
    '1e9999',
    'NaN',
    '../../etc',
    '/SKILL.md',
    '\u0000',
    'a'.repeat(5000),
    '💥',
    '%00',
  ),
  fc.double(),
  fc.bigInt().map(String),
);

/** A valid-looking body with one field replaced or added, or any JSON at all; always invalid for `schema`. */
function malformed(schema: TSchema, valid: Record<string, unknown>) {
  const keys = [...Object.keys(valid), 'extra', '__proto__', 'constructor'];
  return fc
    .oneof(
      fc.jsonValue({ maxDepth: 4 }),
      fc
        .record({ key: fc.constantFrom(...keys), value: weird })
        .map(({ key, value }) => ({ ...valid, [key]: value })),
      fc.dictionary(fc.string({ maxLength: 12 }), weird, { maxKeys: 6 }),
    )
    .filter(isInvalid(schema));
}

const validSkill = {
  name: 'fuzz-new',
  displayName: 'F',
  description: 'A fuzzed skill body.',
  apiBaseUrl: 'http://127.0.0.1:9',
  type: 'API',
};
const routes: Array<{
  method: string;
  path: () => string;
  schema: TSchema;
  valid: Record<string, unknown>;
  token?: () => string;
}> = [
  {
    method: 'POST',
    path: () => '/api/v1/auth/siwe/verify',
    schema: VerifyRequest,
    valid: { message: 'x', signature: `0x${'1'.repeat(130)}` },
  },
  { method: 'POST', path: () => '/api/v1/auth/siwe/nonce', schema: EmptyBody, valid: {} },
  {
    method: 'PATCH',
    path: () => '/api/v1/account',
    schema: AccountPatch,
    valid: { settlementFrequency: 'WEEKLY' },
  },
  { method: 'POST', path: () => '/api/v1/account/api-key/rotate', schema: EmptyBody, valid: {} },
  { method: 'POST', path: () => '/api/v1/account/webhook-secret/rotate', schema: EmptyBody, valid: {} },
  { method: 'POST', path: () => '/api/v1/manage/skills', schema: SkillCreate, valid: validSkill },
  {
    method: 'PATCH',
    path: () => '/api/v1/manage/skills/fuzz-target',
    schema: SkillPatch,
    valid: { displayName: 'x' },
  },
  { method: 'POST', path: () => '/api/v1/manage/skills/fuzz-target/archive', schema: EmptyBody, valid: {} },
  { method: 'POST', path: () => '/api/v1/manage/skills/fuzz-target/validate', schema: EmptyBody, valid: {} },
  {
    method: 'POST',
    path: () => '/api/v1/manage/skills/fuzz-target/endpoints',
    schema: EndpointCreate,
    valid: { path: '/b', method: 'GET', priceUsdc: '1' },
  },
  {
    method: 'PATCH',
    path: () => `/api/v1/manage/skills/fuzz-target/endpoints/${endpointId}`,
    schema: EndpointPatch,
    valid: { priceUsdc: '2' },
  },
  {
    method: 'POST',
    path: () => `/api/v1/manage/skills/fuzz-target/endpoints/${endpointId}/deactivate`,
    schema: EmptyBody,
    valid: {},
  },
  {
    method: 'PUT',
    path: () => '/api/v1/manage/skills/fuzz-target/skill-md',
    schema: SkillMdReplace,
    valid: { content: '---\n---\n' },
  },
  {
    method: 'POST',
    path: () => '/api/v1/operator/skills/fuzz-target/suspend',
    schema: SuspendBody,
    valid: { reason: 'r' },
    token: () => OPERATOR_TOKEN,
  },
  {
    method: 'POST',
    path: () => '/api/v1/operator/skills/fuzz-target/unsuspend',
    schema: EmptyBody,
    valid: {},
    token: () => OPERATOR_TOKEN,
  },
];

async function send(method: string, path: string, body: string, token: string) {
  const response = await fetch(`${h.url}${path}`, {
    method,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body,
  });
  await response.arrayBuffer();
  return response.status;
}

describe('fuzzing every route', () => {
  it('finds no 5xx and no change to stored data', async () => {
    const before = await snapshot();
    let sent = 0;
    for (const route of routes) {
      await fc.assert(
        fc.asyncProperty(malformed(route.schema, route.valid), async (body) => {
          const status = await send(
            route.method,
            route.path(),
            JSON.stringify(body),
            route.token?.() ?? apiKey,
          );
          sent++;
          return status >= 400 && status < 500;
        }),
        { numRuns: 110, seed: 42 },
      );
    }
    // Raw bytes that are not JSON at all, and hostile path parameters and query strings.
    // (An empty body is no body: a valid call of the body-less actions, so not malformed.)
    const raw = fc.string({ unit: 'binary', maxLength: 200 }).filter((s) => {
      if (s.trim() === '') return false;
      try {
        JSON.parse(s);
        return false;
      } catch {
        return true;
      }
    });
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...routes), raw, async (route, body) => {
        sent++;
        const status = await send(route.method, route.path(), body, route.token?.() ?? apiKey);
        return status >= 400 && status < 500;
      }),
      { numRuns: 200, seed: 7 },
    );
    await fc.assert(
      fc.asyncProperty(fc.string({ maxLength: 80 }), fc.string({ maxLength: 80 }), async (segment, query) => {
        sent++;
        const name = encodeURIComponent(segment);
        const q = encodeURIComponent(query);
        for (const path of [
          `/api/v1/manage/skills/${name}`,
          `/api/v1/manage/skills/fuzz-target/endpoints/${name}`,
          `/api/v1/skills/${name}/SKILL.md`,
          `/api/v1/skills?q=${q}&category=${name}&limit=${q}&cursor=${q}`,
          `/api/v1/manage/skills?cursor=${q}&limit=${name}`,
        ]) {
          const response = await fetch(`${h.url}${path}`, { headers: { authorization: `Bearer ${apiKey}` } });
          await response.arrayBuffer();
          sent++;
          if (response.status >= 500) return false;
        }
        return true;
      }),
      { numRuns: 120, seed: 9 },
    );
    // Broken credentials.
    await fc.assert(
      fc.asyncProperty(fc.string({ maxLength: 300 }), async (token) => {
        sent++;
        const response = await fetch(`${h.url}/api/v1/account`, {
          headers: { authorization: `Bearer ${token.replace(/[\r\n]/g, '')}x` },
        });
        await response.arrayBuffer();
        return response.status === 401;
      }),
      { numRuns: 120, seed: 11 },
    );
    expect(sent).toBeGreaterThan(2500);
    expect(await snapshot()).toBe(before);
  }, 120_000);
});
