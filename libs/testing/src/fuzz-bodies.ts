import { findStoredTextViolation } from '@paygate/http';
import fc from 'fast-check';
import { type Json, NO_BODY, type WriteOperation } from './fuzz-operations';
import { schemaValidator } from './schema-validator';

/** Whether a service must refuse `text` as a body: not JSON, over the 256 KiB limit, stored-text rules, schema. */
function mustRefuse(schema: Json | undefined, text: string): boolean {
  if (Buffer.byteLength(text) > 256 * 1024) return true;
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

/** A value of `schema`'s shape, for most mutations to change one field of an otherwise acceptable body. */
function exampleOf(schema: Json | undefined, depth = 0): unknown {
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
function baseBody(operation: Pick<WriteOperation, 'bodySchema' | 'bodyExample'>): unknown {
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

const valueAt = (base: unknown, path: string[]) => path.reduce<any>((node, key) => node?.[key], base);

/** A copy of `base` with `change` applied to the object holding the last key of `path` (when there is one). */
function changedAt(base: unknown, path: string[], change: (node: Json, key: string) => void): unknown {
  const copy = structuredClone(base);
  const node = valueAt(copy, path.slice(0, -1));
  if (node && typeof node === 'object') change(node, path[path.length - 1]!);
  return copy;
}

// defineProperty: `__proto__` becomes an own key (as JSON.parse makes it), not the prototype.
const withValueAt = (base: unknown, path: string[], value: unknown) =>
  changedAt(base, path, (node, key) =>
    Object.defineProperty(node, key, { value, enumerable: true, writable: true, configurable: true }),
  );

// Built once, not per operation: a binary-unit string arbitrary maps every code point when it is created (40 ms).
const anyJson = fc.jsonValue({ maxDepth: 4 }).map((value) => JSON.stringify(value));
const anyObject = fc
  .dictionary(fc.string({ maxLength: 12 }), hostileValue, { maxKeys: 6 })
  .map((value) => toJsonText(value));
const notJson = fc.string({ unit: 'binary', maxLength: 200 }).filter((text) => text.trim() !== '');

/** Body texts for an operation that the service must refuse: its documented shape mutated, or not JSON at all. */
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
  const stringPaths = paths.filter((path) => typeof valueAt(base, path) === 'string');
  const poisoned = fc
    .record({
      path: fc.constantFrom(...(stringPaths.length > 0 ? stringPaths : keys)),
      poison: fc.constantFrom('\u0000', '\ud800', '\udfff', '\u0000\u0000'),
      at: fc.nat(),
    })
    .map(({ path, poison, at }) => {
      const current = valueAt(base, path);
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
  const dropOne = fc
    .constantFrom(...keys)
    .map((path) => toJsonText(changedAt(base, path, (node, key) => delete node[key])));
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
