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

interface FuzzRequest {
  method: string;
  path: string;
  body?: string;
  token: string;
  /** What a correct answer looks like. */
  expect: (status: number) => boolean;
}

const is4xx = (status: number) => status >= 400 && status < 500;

/** Sends requests eight at a time; returns those whose answer was not as expected. */
async function sendAll(requests: FuzzRequest[]): Promise<Array<FuzzRequest & { status: number }>> {
  const failures: Array<FuzzRequest & { status: number }> = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < requests.length) {
        const request = requests[next++]!;
        const response = await fetch(`${h.url}${request.path}`, {
          method: request.method,
          headers: {
            ...(request.body !== undefined ? { 'content-type': 'application/json' } : {}),
            authorization: `Bearer ${request.token}`,
          },
          body: request.body,
        });
        await response.arrayBuffer();
        if (!request.expect(response.status)) failures.push({ ...request, status: response.status });
      }
    }),
  );
  return failures;
}

describe('fuzzing every route', () => {
  it('finds no 5xx and no change to stored data', async () => {
    const before = await snapshot();
    const requests: FuzzRequest[] = [];
    for (const [i, route] of routes.entries()) {
      for (const body of fc.sample(malformed(route.schema, route.valid), { numRuns: 160, seed: 42 + i })) {
        requests.push({
          method: route.method,
          path: route.path(),
          body: JSON.stringify(body),
          token: route.token?.() ?? apiKey,
          expect: is4xx,
        });
      }
    }
    // Raw bytes that are not JSON at all. (An empty body is no body: a valid call of the body-less actions.)
    const raw = fc.string({ unit: 'binary', maxLength: 200 }).filter((text) => {
      if (text.trim() === '') return false;
      try {
        JSON.parse(text);
        return false;
      } catch {
        return true;
      }
    });
    for (const [route, body] of fc.sample(fc.tuple(fc.constantFrom(...routes), raw), {
      numRuns: 300,
      seed: 7,
    })) {
      requests.push({
        method: route.method,
        path: route.path(),
        body,
        token: route.token?.() ?? apiKey,
        expect: is4xx,
      });
    }
    // Hostile path parameters and query strings.
    for (const [segment, query] of fc.sample(
      fc.tuple(fc.string({ maxLength: 80 }), fc.string({ maxLength: 80 })),
      { numRuns: 150, seed: 9 },
    )) {
      const name = encodeURIComponent(segment);
      const q = encodeURIComponent(query);
      for (const path of [
        `/api/v1/manage/skills/${name}`,
        `/api/v1/manage/skills/fuzz-target/endpoints/${name}`,
        `/api/v1/skills/${name}/SKILL.md`,
        `/api/v1/skills?q=${q}&category=${name}&limit=${q}&cursor=${q}`,
        `/api/v1/manage/skills?cursor=${q}&limit=${name}`,
      ]) {
        requests.push({ method: 'GET', path, token: apiKey, expect: (status) => status < 500 });
      }
    }
    // Broken credentials.
    for (const token of fc.sample(fc.string({ maxLength: 300 }), { numRuns: 150, seed: 11 })) {
      requests.push({
        method: 'GET',
        path: '/api/v1/account',
        token: `${token.replace(/[\r\n\t\0]/g, '')}x`,
        expect: (status) => status === 401,
      });
    }

    expect(requests.length).toBeGreaterThan(3000);
    const failures = await sendAll(requests);
    expect(
      failures.slice(0, 5).map(({ method, path, body, status }) => ({ method, path, body, status })),
    ).toEqual([]);
    expect(await snapshot()).toBe(before);
  }, 120_000);
});
