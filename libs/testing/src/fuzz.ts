import { createHash } from 'node:crypto';
import { findStoredTextViolation } from '@paygate/http';
import fc from 'fast-check';
import { sql } from 'kysely';
import { openSchema } from './infra';
import { schemaValidator } from './schema-validator';

/**
 * The shared property test's parts (deploy/test/fuzz.test.ts): the write operations of a served OpenAPI
 * document, hostile bodies for one of them that its documented schema (or the stored-text rules) refuses,
 * a bounded-concurrency sender that keeps figures per route, and a snapshot of every row of every schema.
 */

type Json = Record<string, any>;

export interface WriteOperation {
  service: string;
  method: 'POST' | 'PUT' | 'PATCH';
  /** OpenAPI template path (`/api/v1/manage/skills/{name}`). */
  path: string;
  /** Alternatives: each entry is one security requirement's scheme names ([] = public). */
  security: string[][];
  /** The JSON request body schema, $refs resolved; undefined when the operation documents none. */
  bodySchema?: Json;
  /** The first documented request example, if any. */
  bodyExample?: unknown;
  /** Response body schema by status (as documented). */
  responses: Record<string, Json | undefined>;
  /** The document's shared error body schema. */
  errorSchema: Json;
}

/** Inlines `#/components/...` references (documents built from TypeBox have few; the depth is bounded). */
function resolveRefs(value: unknown, doc: Json, depth = 0): any {
  if (depth > 40) throw new Error('OpenAPI $ref chain too deep');
  if (Array.isArray(value)) return value.map((item) => resolveRefs(item, doc, depth + 1));
  if (value && typeof value === 'object') {
    const ref = (value as Json).$ref;
    if (typeof ref === 'string' && ref.startsWith('#/')) {
      const target = ref
        .slice(2)
        .split('/')
        .reduce<any>((node, part) => node?.[part.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
      if (target === undefined) throw new Error(`unresolved $ref ${ref}`);
      return resolveRefs(target, doc, depth + 1);
    }
    return Object.fromEntries(
      Object.entries(value as Json).map(([key, child]) => [key, resolveRefs(child, doc, depth + 1)]),
    );
  }
  return value;
}

export interface ReadOperation {
  service: string;
  path: string;
  security: string[][];
  pathParameters: string[];
  queryParameters: string[];
  responses: Record<string, Json | undefined>;
  errorSchema: Json;
}

/** Every GET operation of a served OpenAPI document that takes path or query parameters. */
export function parameterisedReads(service: string, document: Json): ReadOperation[] {
  const doc = resolveRefs(document, document) as Json;
  const reads: ReadOperation[] = [];
  for (const [path, item] of Object.entries<Json>(doc.paths ?? {})) {
    const operation = item.get as Json | undefined;
    if (!operation) continue;
    const parameters = [...(item.parameters ?? []), ...(operation.parameters ?? [])] as Json[];
    const named = (where: string) => parameters.filter((p) => p.in === where).map((p) => String(p.name));
    if (named('path').length === 0 && named('query').length === 0) continue;
    reads.push({
      service,
      path,
      security: ((operation.security ?? doc.security ?? []) as Array<Record<string, unknown>>).map((r) =>
        Object.keys(r),
      ),
      pathParameters: named('path'),
      queryParameters: named('query'),
      responses: Object.fromEntries(
        Object.entries<Json>(operation.responses ?? {}).map(([status, response]) => [
          status,
          response.content?.['application/json']?.schema,
        ]),
      ),
      errorSchema: doc.components?.schemas?.Error,
    });
  }
  return reads;
}

/** Percent-encoded hostile values for a path segment or a query value. */
export const HOSTILE_URL_VALUES = [
  '%00',
  'a%00b',
  '%ED%A0%80',
  '%C0%80',
  '%F0%9F%92%A5',
  'x'.repeat(3000),
  '..%2F..',
  '%25',
  '-1',
  '1e999',
  '99999999999999999999999',
  '%27%3B%20drop%20table%20x%3B--',
  '',
];

function firstExample(media: Json | undefined): unknown {
  if (!media) return undefined;
  if (media.example !== undefined) return media.example;
  const first = Object.values<Json>(media.examples ?? {})[0];
  return first?.value;
}

/** Every POST, PUT and PATCH operation of a served OpenAPI document. */
export function writeOperations(service: string, document: Json): WriteOperation[] {
  const doc = resolveRefs(document, document) as Json;
  const operations: WriteOperation[] = [];
  for (const [path, item] of Object.entries<Json>(doc.paths ?? {})) {
    for (const method of ['post', 'put', 'patch'] as const) {
      const operation = item[method] as Json | undefined;
      if (!operation) continue;
      const security = (operation.security ?? doc.security ?? []) as Array<Record<string, unknown>>;
      operations.push({
        service,
        method: method.toUpperCase() as WriteOperation['method'],
        path,
        security: security.map((requirement) => Object.keys(requirement)),
        bodySchema: operation.requestBody?.content?.['application/json']?.schema,
        bodyExample: firstExample(operation.requestBody?.content?.['application/json']),
        responses: Object.fromEntries(
          Object.entries<Json>(operation.responses ?? {}).map(([status, response]) => [
            status,
            response.content?.['application/json']?.schema,
          ]),
        ),
        errorSchema: doc.components?.schemas?.Error,
      });
    }
  }
  return operations;
}

/** What an operation without a documented body accepts: nothing, or an empty object. */
const NO_BODY: Json = { type: 'object', properties: {}, additionalProperties: false };

/** The JSON body limit of every service (@paygate/http createApp). */
export const FUZZ_BODY_LIMIT_BYTES = 256 * 1024;

/**
 * Whether the service must refuse `text` as the body of an operation with `schema`: not JSON, too large,
 * breaking a stored-text rule, or not matching the documented schema.
 */
export function mustRefuse(schema: Json | undefined, text: string): boolean {
  if (Buffer.byteLength(text) > FUZZ_BODY_LIMIT_BYTES) return true;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return true;
  }
  if (value === null || typeof value !== 'object') return true;
  if (findStoredTextViolation(value, 'body')) return true;
  return !schemaValidator(schema ?? NO_BODY)(value);
}

/** Strings tried, in order, for a string schema with a pattern or format (the first it accepts is used). */
const STRING_CANDIDATES = [
  'fuzz-target',
  'fuzz-new',
  '/a',
  'GET',
  'POST',
  'API',
  '1',
  '0.5',
  'http://127.0.0.1:9/a',
  'https://example.com/a',
  'fuzz@example.com',
  '2026-01-01T00:00:00Z',
  '2026-01-01',
  '0190c3e4-0000-7000-8000-000000000000',
  `0x${'1'.repeat(40)}`,
  `0x${'1'.repeat(64)}`,
  `0x${'1'.repeat(130)}`,
  '01J0000000000000000000000A',
  'abc',
  'a',
];

function stringExample(schema: Json): string {
  const accepts = schemaValidator(schema);
  return (
    STRING_CANDIDATES.find((candidate) => accepts(candidate)) ??
    'a'.repeat(Math.max(1, schema.minLength ?? 1))
  );
}

/**
 * A value of the right shape for `schema` (documented example, const, enum, default, or built from the
 * types, with strings that match the pattern or format where one of a few candidates does): the start of
 * mutations, so that most mutate one field of an otherwise acceptable body.
 */
export function exampleOf(schema: Json | undefined, depth = 0): unknown {
  if (!schema || depth > 6) return {};
  if (schema.example !== undefined) return schema.example;
  if (Array.isArray(schema.examples) && schema.examples.length > 0) return schema.examples[0];
  if (schema.const !== undefined) return schema.const;
  if (Array.isArray(schema.enum)) return schema.enum[0];
  if (schema.default !== undefined) return schema.default;
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (Array.isArray(alternatives)) return exampleOf(alternatives[0], depth + 1);
  if (Array.isArray(schema.allOf))
    return Object.assign({}, ...schema.allOf.map((s: Json) => exampleOf(s, depth + 1)));
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'object':
    case undefined:
      return Object.fromEntries(
        Object.entries<Json>(schema.properties ?? {}).map(([key, child]) => [
          key,
          exampleOf(child, depth + 1),
        ]),
      );
    case 'array':
      return Array.from({ length: Math.max(1, schema.minItems ?? 1) }, () =>
        exampleOf(schema.items, depth + 1),
      );
    case 'string':
      return stringExample(schema);
    case 'integer':
    case 'number':
      return schema.minimum ?? (schema.exclusiveMinimum !== undefined ? schema.exclusiveMinimum + 1 : 1);
    case 'boolean':
      return true;
    default:
      return null;
  }
}

/** The body mutations start from: the operation's documented example, else one built from its schema. */
export function baseBody(operation: Pick<WriteOperation, 'bodySchema' | 'bodyExample'>): unknown {
  return operation.bodyExample ?? exampleOf(operation.bodySchema ?? NO_BODY);
}

const MEGABYTE_STRING = 'x'.repeat(1024 * 1024);
/** Strings Postgres or JSON cannot keep, and other hostile text. */
const hostileText = fc.constantFrom(
  '\u0000',
  'ok\u0000',
  'a\u0000b',
  '\ud800',
  'x\udfff',
  '\udc00\ud800',
  '\ufffe',
  '',
  ' ',
  '%00',
  '../../etc/passwd',
  "'; drop table skills; --",
  '💥',
  '0x',
  '-1',
  'NaN',
  'a'.repeat(5000),
);
/** Numbers where strings go, and integers JSON or Postgres cannot hold (written as raw JSON text). */
const hostileNumberText = fc.constantFrom(
  '0',
  '-1',
  '1.5',
  '1e308',
  '1e999',
  '-1e999',
  '9007199254740993',
  '18446744073709551616',
  '-9223372036854775809',
  '2147483648',
  '123456789012345678901234567890123456789',
);
/** Raw JSON text standing in a value (numbers no JS value holds exactly, nesting built as text). */
class RawJson {
  constructor(readonly text: string) {}
}
/** A hostile value: hostile text, a raw number, another type, or any JSON. */
const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: hostileText },
  { weight: 3, arbitrary: hostileNumberText.map((text) => new RawJson(text)) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
  { weight: 1, arbitrary: fc.constantFrom(null, true, false, [], {}, [1, 'a'], { a: 1 }) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
);

/** JSON text of a value that may hold RawJson parts. */
function toJsonText(value: unknown): string {
  const raws: string[] = [];
  const text = JSON.stringify(value, (_key, child) => {
    if (!(child instanceof RawJson)) return child;
    raws.push(child.text);
    return `\u0001raw${raws.length - 1}\u0001`;
  });
  return raws.length === 0
    ? text
    : text.replace(/"\\u0001raw(\d+)\\u0001"/g, (_match, index) => raws[Number(index)]!);
}

/** Nesting deeper than any service accepts: `[[[…]]]` or `{"a":{"a":…}}` under a field. */
const deepNesting = fc
  .record({
    depth: fc.oneof({ weight: 9, arbitrary: fc.integer({ min: 33, max: 3000 }) }, fc.constant(100_000)),
    objects: fc.boolean(),
  })
  .map(({ depth, objects }) =>
    objects ? `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}` : `${'['.repeat(depth)}${']'.repeat(depth)}`,
  );

/** Paths of every value in `value` (to mutate one at a time), up to a bounded depth. */
function valuePaths(value: unknown, prefix: string[] = [], out: string[][] = [], depth = 0): string[][] {
  if (depth > 4 || value === null || typeof value !== 'object') return out;
  for (const [key, child] of Object.entries(value)) {
    out.push([...prefix, key]);
    valuePaths(child, [...prefix, key], out, depth + 1);
  }
  return out;
}

function withValueAt(base: unknown, path: string[], value: unknown): unknown {
  const copy = structuredClone(base) as Json;
  let node = copy;
  for (const key of path.slice(0, -1)) node = node?.[key];
  // defineProperty: `__proto__` becomes an own key (as JSON.parse makes it), not the prototype.
  if (node && typeof node === 'object')
    Object.defineProperty(node, path[path.length - 1]!, {
      value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  return copy;
}

/**
 * Body texts (JSON or not) for an operation, each one the service must refuse: the documented shape with one
 * value mutated (NUL, unpaired surrogates, numbers for strings, integers too large, other types, 1 MB
 * strings), deep nesting, unknown or missing fields, any JSON, and bytes that are not JSON.
 */
export function hostileBodies(
  operation: Pick<WriteOperation, 'bodySchema' | 'bodyExample'>,
  runs: number,
  seed: number,
): string[] {
  const schema = operation.bodySchema;
  const base = baseBody(operation);
  const paths = valuePaths(base);
  const keys = [...paths, ['extra'], ['__proto__'], ['constructor']];
  const mutateOne = fc
    .record({ path: fc.constantFrom(...keys), value: hostileValue })
    .map(({ path, value }) => toJsonText(withValueAt(base, path, value)));
  // The base's own strings with NUL or an unpaired surrogate inside: every other rule still met.
  const stringPaths = paths.filter(
    (path) => typeof path.reduce<any>((node, key) => node?.[key], base) === 'string',
  );
  const poisoned = fc
    .record({
      path: fc.constantFrom(...(stringPaths.length > 0 ? stringPaths : keys)),
      poison: fc.constantFrom('\u0000', '\ud800', '\udfff', '\u0000\u0000'),
      at: fc.nat(),
    })
    .map(({ path, poison, at }) => {
      const current = path.reduce<any>((node, key) => node?.[key], base);
      const text = typeof current === 'string' && current.length > 0 ? current : 'fuzz text';
      const index = at % (text.length + 1);
      return toJsonText(withValueAt(base, path, `${text.slice(0, index)}${poison}${text.slice(index)}`));
    });
  const megabyte = fc
    .constantFrom(...keys)
    .map((path) => toJsonText(withValueAt(base, path, MEGABYTE_STRING)));
  const deep = fc
    .record({ path: fc.constantFrom(...keys), nesting: deepNesting, whole: fc.boolean() })
    .map(({ path, nesting, whole }) =>
      whole ? nesting : toJsonText(withValueAt(base, path, new RawJson(nesting))),
    );
  const dropOne = fc.constantFrom(...keys).map((path) => {
    const copy = structuredClone(base) as Json;
    let node = copy;
    for (const key of path.slice(0, -1)) node = node?.[key];
    if (node && typeof node === 'object') delete node[path[path.length - 1]!];
    return toJsonText(copy);
  });
  const anyJson = fc.jsonValue({ maxDepth: 4 }).map((value) => JSON.stringify(value));
  const anyObject = fc
    .dictionary(fc.string({ maxLength: 12 }), hostileValue, { maxKeys: 6 })
    .map((value) => toJsonText(value));
  const notJson = fc.string({ unit: 'binary', maxLength: 200 }).filter((text) => text.trim() !== '');
  const body = fc.oneof(
    // About 1 in 180 bodies is over a megabyte: enough to hit the limit on every route, not to flood it.
    { weight: 100, arbitrary: mutateOne },
    { weight: 30, arbitrary: poisoned },
    { weight: 16, arbitrary: deep },
    { weight: 1, arbitrary: megabyte },
    { weight: 12, arbitrary: dropOne },
    { weight: 20, arbitrary: anyJson },
    { weight: 20, arbitrary: anyObject },
    { weight: 10, arbitrary: notJson },
  );
  return fc.sample(
    body.filter((text) => mustRefuse(schema, text)),
    { numRuns: runs, seed },
  );
}

/** Whether the body mutations start from meets the documented schema (so most reach one field's rule). */
export function baseAccepted(operation: Pick<WriteOperation, 'bodySchema' | 'bodyExample'>): boolean {
  return schemaValidator(operation.bodySchema ?? NO_BODY)(baseBody(operation));
}

/** A stable seed per operation (FUZZ_SEED shifts them all). */
export function operationSeed(operation: Pick<WriteOperation, 'method' | 'path'>): number {
  const shift = Number(process.env.FUZZ_SEED ?? 0);
  return (
    createHash('sha256').update(`${operation.method} ${operation.path}`).digest().readUInt32BE(0) ^ shift
  );
}

export interface RouteFigures {
  route: string;
  /** Whether the mutated bodies start from one the documented schema accepts. */
  validBase: boolean;
  requests: number;
  byStatus: Record<string, number>;
  maxLatencyMs: number;
  totalLatencyMs: number;
}

export interface FuzzCall {
  url: string;
  method: string;
  headers: Record<string, string>;
  body?: string;
}

/**
 * Sends the calls `concurrency` at a time (keep-alive connections), records status counts and latencies in
 * `figures`, and hands each answer to `check` (which returns a problem, or undefined).
 */
export async function sendConcurrently(
  calls: FuzzCall[],
  options: {
    concurrency: number;
    figures: RouteFigures;
    check: (call: FuzzCall, status: number, contentType: string | null, body: string) => string | undefined;
  },
): Promise<Array<{ call: FuzzCall; status: number; problem: string; body: string }>> {
  const problems: Array<{ call: FuzzCall; status: number; problem: string; body: string }> = [];
  let next = 0;
  const { figures } = options;
  await Promise.all(
    Array.from({ length: options.concurrency }, async () => {
      while (next < calls.length) {
        const call = calls[next++]!;
        const started = performance.now();
        let status: number;
        let text: string;
        let contentType: string | null = null;
        try {
          const response = await fetch(call.url, {
            method: call.method,
            headers: call.headers,
            body: call.body,
            signal: AbortSignal.timeout(30_000),
          });
          status = response.status;
          contentType = response.headers.get('content-type');
          text = await response.text();
        } catch (error) {
          status = 0;
          text = String((error as Error).cause ?? error);
        }
        const elapsed = performance.now() - started;
        figures.requests += 1;
        figures.byStatus[status] = (figures.byStatus[status] ?? 0) + 1;
        figures.maxLatencyMs = Math.max(figures.maxLatencyMs, elapsed);
        figures.totalLatencyMs += elapsed;
        const problem = status === 0 ? 'no answer' : options.check(call, status, contentType, text);
        if (problem) problems.push({ call, status, problem, body: text.slice(0, 300) });
      }
    }),
  );
  return problems;
}

/** The figures as a Markdown table (route, requests, answers by status, mean and max latency). */
export function figuresTable(rows: RouteFigures[]): string {
  const lines = [
    '| route | valid base | requests | answers by status | mean ms | max ms |',
    '|---|---|---:|---|---:|---:|',
    ...rows.map((row) => {
      const statuses = Object.entries(row.byStatus)
        .sort(([a], [b]) => Number(a) - Number(b))
        .map(([status, count]) => `${status}×${count}`)
        .join(' ');
      const mean = row.requests ? row.totalLatencyMs / row.requests : 0;
      return `| ${row.route} | ${row.validBase ? 'yes' : 'no'} | ${row.requests} | ${statuses} | ${mean.toFixed(1)} | ${row.maxLatencyMs.toFixed(0)} |`;
    }),
  ];
  return lines.join('\n');
}

/**
 * Every row of every table of the schemas, as sorted JSON lines per table (bookkeeping tables and the
 * named volatile columns left out): compare two snapshots with `changedRows`.
 */
export async function snapshotRows(
  schemas: string[],
  options: { skipTables?: RegExp; volatileColumns?: Set<string> } = {},
): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const schema of schemas) {
    const db = openSchema(schema);
    try {
      const tables = await sql<{ table_name: string }>`
        select table_name from information_schema.tables
        where table_schema = ${schema} and table_type = 'BASE TABLE'`.execute(db);
      for (const { table_name: table } of tables.rows) {
        if (options.skipTables?.test(table)) continue;
        const rows = await db.selectFrom(table).selectAll().execute();
        out[`${schema}.${table}`] = rows
          .map((row) =>
            JSON.stringify(row, (key, value) =>
              options.volatileColumns?.has(key)
                ? undefined
                : typeof value === 'bigint'
                  ? String(value)
                  : value,
            ),
          )
          .sort();
      }
    } finally {
      await db.destroy();
    }
  }
  return out;
}

/** Rows of `before` that are no longer exactly in `after` (new rows are not changes). */
export function changedRows(before: Record<string, string[]>, after: Record<string, string[]>): string[] {
  const changed: string[] = [];
  for (const [table, rows] of Object.entries(before)) {
    const remaining = new Map<string, number>();
    for (const row of after[table] ?? []) remaining.set(row, (remaining.get(row) ?? 0) + 1);
    for (const row of rows) {
      const count = remaining.get(row) ?? 0;
      if (count === 0) changed.push(`${table}: ${row.slice(0, 300)}`);
      else remaining.set(row, count - 1);
    }
  }
  return changed;
}
