import { createHash } from 'node:crypto';

/** The operations of a served OpenAPI document that the shared property test (deploy/test/fuzz.test.ts) calls. */

export type Json = Record<string, any>;

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

/** The document's operations of `methods` ($refs resolved), with what reads and writes share. */
function operationsOf(document: Json, methods: readonly string[]) {
  const doc = resolveRefs(document, document) as Json;
  return Object.entries<Json>(doc.paths ?? {}).flatMap(([path, item]) =>
    methods.flatMap((method) => {
      const operation = item[method] as Json | undefined;
      if (!operation) return [];
      const security = (operation.security ?? doc.security ?? []) as Array<Record<string, unknown>>;
      const responses = Object.entries<Json>(operation.responses ?? {}).map(([status, response]) => [
        status,
        response.content?.['application/json']?.schema,
      ]);
      return [
        {
          path,
          item,
          method,
          operation,
          security: security.map((requirement) => Object.keys(requirement)),
          responses: Object.fromEntries(responses) as Record<string, Json | undefined>,
          errorSchema: doc.components?.schemas?.Error as Json,
        },
      ];
    }),
  );
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
  return operationsOf(document, ['get']).flatMap(({ item, operation, method: _get, ...read }) => {
    const parameters = [...(item.parameters ?? []), ...(operation.parameters ?? [])] as Json[];
    const named = (where: string) => parameters.filter((p) => p.in === where).map((p) => String(p.name));
    const [pathParameters, queryParameters] = [named('path'), named('query')];
    if (pathParameters.length === 0 && queryParameters.length === 0) return [];
    return [{ service, pathParameters, queryParameters, ...read }];
  });
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

/** Every POST, PUT and PATCH operation of a served OpenAPI document. */
export function writeOperations(service: string, document: Json): WriteOperation[] {
  return operationsOf(document, ['post', 'put', 'patch']).map(
    ({ item: _item, operation, method, ...write }) => {
      const media = operation.requestBody?.content?.['application/json'] as Json | undefined;
      return {
        service,
        method: method.toUpperCase() as WriteOperation['method'],
        bodySchema: media?.schema,
        bodyExample: media?.example ?? Object.values<Json>(media?.examples ?? {})[0]?.value,
        ...write,
      };
    },
  );
}

/** What an operation without a documented body accepts: nothing, or an empty object. */
export const NO_BODY: Json = { type: 'object', properties: {}, additionalProperties: false };

/** A stable seed per operation (FUZZ_SEED shifts them all). */
export function operationSeed(operation: Pick<WriteOperation, 'method' | 'path'>): number {
  const shift = Number(process.env.FUZZ_SEED ?? 0);
  return (
    createHash('sha256').update(`${operation.method} ${operation.path}`).digest().readUInt32BE(0) ^ shift
  );
}
