/**
 * The shared property test of every write route: all seven services run on real parts; each one's served
 * OpenAPI document names its POST, PUT and PATCH operations, and each gets FUZZ_RUNS (100 in `make test`, 2,000
 * in `make fuzz`) bodies its documented schema or the stored-text rules refuse (NUL, unpaired surrogates, 1 MB
 * strings, deep nesting, numbers for strings, integers too large, other types, bytes that are not JSON) and one
 * over the body limit, with working credentials so they reach validation. Never a 5xx; every 4xx in the
 * documented error shape; every row stored before the run exactly as it was. Prints the figures per route (docs/fuzz.md).
 */
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { NotifierDatabase } from '@paygate/notifier';
import { createActiveSkill, openSchema, schemaValidator, signUpSeller, waitFor } from '@paygate/testing';
import {
  baseAccepted,
  changedRows,
  type FuzzCall,
  figuresTable,
  HOSTILE_URL_VALUES,
  hostileBodies,
  operationSeed,
  parameterisedReads,
  type ReadOperation,
  type RouteFigures,
  sendConcurrently,
  snapshotRows,
  type WriteOperation,
  writeOperations,
} from '@paygate/testing/fuzz';
import { Wallet } from 'ethers';
import express from 'express';
import { type AllServices, startAllServices } from './all-services';

/**
 * `make test` sends 100 bodies per route, `make fuzz` the full 2,000. The seeds are fixed per route (FUZZ_SEED
 * shifts them all), and a sample of n is the first n of a larger one (fast-check draws in order), so make test's
 * bodies are exactly the first 100 of make fuzz's. At 100 a route still gets every kind of body but the rarest: by
 * their weights about 48 mutated fields, 14 poisoned strings, 8 deep nestings, 6 dropped fields, 19 arbitrary
 * values and 5 texts that are not JSON. The rarest, a megabyte string (1 in 209 bodies), goes to every route on its
 * own (OVERSIZED_BODY), where 200 random bodies reached 38 routes of 43 in a run. The 8,600 requests of 200 a
 * route were most of the suite's time.
 */
const RUNS = Number(process.env.FUZZ_RUNS ?? 100);
/** A megabyte string in a field: over every service's body limit (256 kB), whatever the route's schema. */
const OVERSIZED_BODY = JSON.stringify({ fuzz: 'x'.repeat(1024 * 1024) });
const CONCURRENCY = 16;
const OPERATOR_TOKEN = 'fuzz-operator-token-00000000000000';
/** Where each service serves its OpenAPI document (chain-indexer has no public API). */
const DOCUMENTS: Record<string, string> = {
  registry: '/api/v1/openapi.json',
  'gateway-proxy': '/api/v1/openapi/gateway.json',
  checkout: '/api/v1/openapi/checkout.json',
  'escrow-ledger': '/api/v1/openapi/ledger.json',
  notifier: '/api/v1/openapi/notifier.json',
  settlement: '/api/v1/openapi/settlement.json',
};
/** Columns background work or any authenticated call updates on its own (health pings, leases, key last use). */
const VOLATILE_COLUMNS = new Set([
  'health_checked_at',
  'validation_lease_until',
  'api_key_last_used_at',
  'previous_api_key_last_used_at',
]);
/** Bookkeeping tables: migrations, the outbox/inbox rows the relays mark as they go, rate-limit counts. */
const SKIP_TABLES = /^(kysely_migration|kysely_migration_lock|outbox|inbox|rate_limit_windows)$/;
/** Of every 20 calls, one has a hostile value in a path parameter. */
const HOSTILE_PATH_EVERY = 20;

let all: AllServices;
let upstream: http.Server;
let apiKey: string;
let publishableKey: string;
let pathValues: Record<string, string>;

beforeAll(async () => {
  all = await startAllServices({
    label: 'fuzz',
    operatorToken: OPERATOR_TOKEN,
    publicBaseUrl: 'http://127.0.0.1:9',
    // Every rate limit out of the way: a 429 would answer before validation and hide what the body does.
    extra: {
      registry: {
        HEALTH_INTERVAL_MS: '3600000',
        SIWE_NONCES_PER_MINUTE: '100000000',
        SIGN_INS_PER_MINUTE: '100000000',
        ACCOUNTS_PER_HOUR: '100000000',
        MAX_SKILLS_PER_SELLER: '100000000',
      },
      'gateway-proxy': {
        RATE_LIMIT_PER_MINUTE: '100000000',
        VERIFY_PER_SELLER_PER_MINUTE: '100000000',
        X402_FACILITATOR_PER_MINUTE: '100000000',
        DISCOVERY_PER_MINUTE: '100000000',
      },
      'escrow-ledger': { REFUND_REQUESTS_PER_MINUTE: '100000000', REFUNDS_PER_MINUTE: '100000000' },
      checkout: { SESSION_RATE_LIMIT_PER_KEY: '1000000', SESSION_RATE_LIMIT_PER_CLIENT: '1000000' },
      notifier: { MANUAL_DELIVERIES_PER_MINUTE: '100000000' },
    },
  });
  const api = express();
  api.all('/a', (_req, res) => {
    res.json({ ok: true });
  });
  upstream = await new Promise((resolve) => {
    const server = api.listen(0, '127.0.0.1', () => resolve(server));
  });
  const registryUrl = all.services.registry!.url;
  const seller = await signUpSeller(registryUrl, Wallet.createRandom());
  apiKey = seller.apiKey;
  publishableKey = seller.publishableKey;
  const skill = await createActiveSkill(registryUrl, apiKey, {
    name: 'fuzz-target',
    apiBaseUrl: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
    endpoints: [{ path: '/a', method: 'POST', priceUsdc: '0.5', description: 'a' }],
  });
  // A checkout session, once checkout's projection knows the skill: rows the run must leave alone. The default
  // matching: a unique exact amount at the one checkout wallet, so no deposit address reaches the chain-indexer.
  const session = await waitFor(
    async () => {
      const response = await fetch(`${all.services.checkout!.url}/api/v1/checkout/sessions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${publishableKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ skill: 'fuzz-target' }),
      });
      return response.status === 201
        ? ((await response.json()) as { sessionId: string; matching: string })
        : undefined;
    },
    { timeoutMs: 20_000, message: 'checkout never knew the skill' },
  );
  expect(session.matching).toBe('amount');
  // The session's checkout.session_created reaches the notifier as an event, which stores its snapshot: the
  // snapshot before the run must not race it (a row taken as "changed" by the fuzzing).
  const notifier = openSchema<NotifierDatabase>(all.env.schemaFor('notifier'));
  try {
    await waitFor(
      async () =>
        (await notifier
          .selectFrom('sessions')
          .select('session_id')
          .where('session_id', '=', session.sessionId)
          .executeTakeFirst()) !== undefined,
      { timeoutMs: 20_000, message: "the notifier never stored the session's snapshot" },
    );
  } finally {
    await notifier.destroy();
  }
  pathValues = {
    name: 'fuzz-target',
    endpointId: skill.endpoints[0]!.endpointId,
  };
}, 180_000);

afterAll(async () => {
  await new Promise((resolve) => upstream?.close(resolve));
  await all?.stop();
});

/** The bearer token for one of the operation's security alternatives (they take turns). */
function tokenFor(operation: Pick<WriteOperation, 'security' | 'path'>, index: number): string | undefined {
  if (operation.security.length === 0) return undefined;
  const schemes = operation.security[index % operation.security.length]!;
  if (schemes.length === 0) return undefined;
  const scheme = schemes[0]!;
  if (['apiKey', 'secretKey', 'session'].includes(scheme)) return apiKey;
  if (scheme === 'publishableKey') return publishableKey;
  if (['operator', 'operatorToken'].includes(scheme)) return OPERATOR_TOKEN;
  throw new Error(`${operation.path}: no credentials for the security scheme ${scheme}`);
}

/** The URL path with known fixtures in its parameters (others get an id that names nothing). */
function pathFor(operation: WriteOperation, index: number): string {
  const hostile = index % HOSTILE_PATH_EVERY === HOSTILE_PATH_EVERY - 1;
  return operation.path.replace(/\{([^}]+)\}/g, (_match, name: string) =>
    hostile
      ? HOSTILE_URL_VALUES[index % HOSTILE_URL_VALUES.length]! || '%20'
      : encodeURIComponent(pathValues[name] ?? '0190c3e4-0000-7000-8000-000000000000'),
  );
}

/** A problem with an answer, or undefined: no 5xx, and a 4xx body of the documented shape. */
function checkAnswer(
  operation: Pick<WriteOperation, 'responses' | 'errorSchema'>,
  status: number,
  contentType: string | null,
  body: string,
): string | undefined {
  if (status >= 500) return `answered ${status}`;
  if (status === 429) return 'rate limited before validation (raise its limit in the fuzz environment)';
  if (status < 400) return undefined;
  if (!contentType?.includes('application/json')) return `a ${status} that is not JSON (${contentType})`;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return `a ${status} whose body does not parse`;
  }
  const schema = operation.responses[String(status)] ?? operation.errorSchema;
  const validator = schemaValidator(schema);
  return validator(parsed)
    ? undefined
    : `a ${status} not in the documented shape: ${validator.errors?.[0]?.message}`;
}

async function servedDocuments(): Promise<Array<[string, Record<string, unknown>]>> {
  const documents: Array<[string, Record<string, unknown>]> = [];
  for (const [service, path] of Object.entries(DOCUMENTS)) {
    const response = await fetch(`${all.services[service]!.url}${path}`);
    expect({ service, status: response.status }).toEqual({ service, status: 200 });
    documents.push([service, (await response.json()) as Record<string, unknown>]);
  }
  return documents;
}

describe('fuzzing every route of every service', () => {
  it(`answers ${RUNS} refused bodies per route with 4xx in the documented shape and changes no stored row`, async () => {
    const operations = (await servedDocuments()).flatMap(([service, document]) =>
      writeOperations(service, document),
    );
    expect(operations.length).toBeGreaterThanOrEqual(20);

    const schemas = Object.keys(all.services).map((name) => all.env.schemaFor(name));
    const snapshotOptions = { skipTables: SKIP_TABLES, volatileColumns: VOLATILE_COLUMNS };
    const before = await snapshotRows(schemas, snapshotOptions);

    const figures: RouteFigures[] = [];
    const problems: Array<{ route: string; status: number; problem: string; body: string; sent?: string }> =
      [];
    const started = performance.now();
    for (const operation of operations) {
      const route = `${operation.service} ${operation.method} ${operation.path}`;
      const row: RouteFigures = {
        route,
        validBase: baseAccepted(operation),
        requests: 0,
        byStatus: {},
        maxLatencyMs: 0,
        totalLatencyMs: 0,
      };
      figures.push(row);
      const baseUrl = all.services[operation.service]!.url;
      const bodies = [...hostileBodies(operation, RUNS, operationSeed(operation)), OVERSIZED_BODY];
      const calls: FuzzCall[] = bodies.map((body, index) => {
        const token = tokenFor(operation, index);
        return {
          url: `${baseUrl}${pathFor(operation, index)}`,
          method: operation.method,
          headers: {
            'content-type': 'application/json',
            ...(token ? { authorization: `Bearer ${token}` } : {}),
          },
          body,
        };
      });
      const found = await sendConcurrently(calls, {
        concurrency: CONCURRENCY,
        figures: row,
        // Every body sent is one the documented schema or the text rules refuse: a 2xx is a validation gap.
        check: (_call, status, contentType, body) =>
          status < 300
            ? `accepted (${status}) a body it must refuse`
            : checkAnswer(operation, status, contentType, body),
      });
      problems.push(
        ...found.map(({ call, status, problem, body }) => ({
          route,
          status,
          problem,
          body,
          sent: call.body?.slice(0, 200),
        })),
      );
    }
    const seconds = (performance.now() - started) / 1000;
    const total = figures.reduce((sum, row) => sum + row.requests, 0);
    console.log(
      `${figuresTable(figures)}\n\n${total} requests over ${figures.length} routes in ${seconds.toFixed(1)} s ` +
        `(${(total / seconds).toFixed(0)}/s, concurrency ${CONCURRENCY}, FUZZ_RUNS=${RUNS})`,
    );

    for (const row of figures)
      expect({ route: row.route, requests: row.requests }).toEqual({ route: row.route, requests: RUNS + 1 });
    expect(problems.slice(0, 10)).toEqual([]);
    const after = await snapshotRows(schemas, snapshotOptions);
    expect(changedRows(before, after)).toEqual([]);
  }, 900_000);

  it('answers hostile path and query values of every parameterised read, and broken credentials, with 4xx', async () => {
    const reads: ReadOperation[] = (await servedDocuments()).flatMap(([service, document]) =>
      parameterisedReads(service, document),
    );
    const row: RouteFigures = {
      route: `${reads.length} parameterised GET routes`,
      validBase: true,
      requests: 0,
      byStatus: {},
      maxLatencyMs: 0,
      totalLatencyMs: 0,
    };
    const problems: string[] = [];
    for (const read of reads) {
      const calls: FuzzCall[] = HOSTILE_URL_VALUES.flatMap((value, index) => {
        const token = tokenFor(read, index);
        const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
        const path = read.path.replace(/\{([^}]+)\}/g, (_m, name: string) =>
          encodeURIComponent(pathValues[name] ?? '0190c3e4-0000-7000-8000-000000000000'),
        );
        const base = all.services[read.service]!.url;
        return [
          ...read.pathParameters.map((name) => ({
            url: `${base}${read.path.replace(`{${name}}`, value || '%20').replace(/\{([^}]+)\}/g, (_m, other: string) => encodeURIComponent(pathValues[other] ?? 'x'))}`,
            method: 'GET',
            headers,
          })),
          ...read.queryParameters.map((name) => ({
            url: `${base}${path}?${name}=${value}`,
            method: 'GET',
            headers,
          })),
          ...read.queryParameters.map((name) => ({
            url: `${base}${path}?${name}=${value}&${name}=2&${name}[a][b]=1`,
            method: 'GET',
            headers,
          })),
        ];
      });
      const found = await sendConcurrently(calls, {
        concurrency: CONCURRENCY,
        figures: row,
        check: (_call, status, contentType, body) =>
          status === 404 && body.length === 0 ? undefined : checkAnswer(read, status, contentType, body),
      });
      problems.push(
        ...found.map(({ call, status, problem }) => `${call.url.slice(0, 200)} → ${status}: ${problem}`),
      );
    }
    // Broken credentials: never in, never a 5xx.
    const registryUrl = all.services.registry!.url;
    const brokenTokens = [
      ...HOSTILE_URL_VALUES.map(decodeURIComponentSafe),
      `${apiKey}x`,
      `${apiKey.slice(0, -1)}`,
      'sk_',
      'pk_x',
      '\u00ff'.repeat(300),
    ];
    const credentialCalls: FuzzCall[] = brokenTokens
      .filter((token) => /^[\x21-\x7e\u00a0-\u00ff]+$/.test(token))
      .map((token) => ({
        url: `${registryUrl}/api/v1/account`,
        method: 'GET',
        headers: { authorization: `Bearer ${token}` },
      }));
    const credentialProblems = await sendConcurrently(credentialCalls, {
      concurrency: CONCURRENCY,
      figures: row,
      check: (_call, status) => (status === 401 ? undefined : `answered ${status}, not 401`),
    });
    problems.push(
      ...credentialProblems.map(
        ({ call, status, problem }) => `${call.headers.authorization} → ${status}: ${problem}`,
      ),
    );
    console.log(figuresTable([row]));
    expect(reads.length).toBeGreaterThan(10);
    expect(problems.slice(0, 10)).toEqual([]);
  }, 300_000);
});

function decodeURIComponentSafe(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}
