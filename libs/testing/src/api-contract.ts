/**
 * Checks that the OpenAPI document lists exactly the routed operations, each answers a documented status (never
 * express's "no route" 404), and an input breaking a documented rule gets a 400 naming the field and the rule.
 */

import type { Express } from 'express';

interface ApiContractTarget {
  url: string;
  app: Express;
  document: any;
  /** The bearer token to send for each security scheme the document names. */
  credentials: Record<string, string>;
  /** A value for a path parameter that meets its rule (undefined: `0`). */
  pathValue?: (path: string, name: string) => string | undefined;
}

interface DocumentedOperation {
  method: string;
  /** OpenAPI path, `{id}` for a parameter. */
  path: string;
  operation: any;
}

/** Every `METHOD path` the app routes (`:id` as `{id}`) but startService's /healthz, /readyz and /metrics. */
export function servedApiOperations(app: Express): string[] {
  const stack = (app as unknown as { router: { stack: any[] } }).router.stack;
  return stack
    .filter((layer) => layer.route?.path)
    .flatMap((layer) =>
      Object.keys(layer.route.methods)
        .filter((m) => m !== '_all')
        .map((m) => `${m} ${String(layer.route.path).replace(/:([A-Za-z]+)/g, '{$1}')}`),
    )
    .filter((op) => !/ \/(healthz|readyz|metrics)$/.test(op));
}

const METHODS = ['get', 'post', 'put', 'patch', 'delete'];

export function documentedOperations(document: any): DocumentedOperation[] {
  return Object.entries(document.paths as Record<string, Record<string, unknown>>).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method]) => METHODS.includes(method))
      .map(([method, operation]) => ({ method, path, operation })),
  );
}

/** `METHOD path` of each documented operation, as servedApiOperations writes them. */
export function documentedOperationNames(document: any): string[] {
  return documentedOperations(document).map(({ method, path }) => `${method} ${path}`);
}

/** The token for the operation's first security alternative (undefined when public or optional). */
function tokenFor(target: ApiContractTarget, operation: any): string | undefined {
  const alternatives = (operation.security ?? []) as Array<Record<string, unknown>>;
  const scheme = Object.keys(alternatives[0] ?? {})[0];
  if (scheme === undefined) return undefined;
  const token = target.credentials[scheme];
  if (!token) throw new Error(`no credentials for the security scheme ${scheme}`);
  return token;
}

/** The answer to one request of the operation: valid credentials and path values, an empty JSON body by default. */
async function call(
  target: ApiContractTarget,
  { method, path, operation }: DocumentedOperation,
  options: { path?: Record<string, string>; query?: Record<string, string>; body?: unknown } = {},
): Promise<{ status: number; body: any }> {
  const query = new URLSearchParams(options.query ?? {}).toString();
  const url = path.replace(/\{([^}]+)\}/g, (_m, name: string) =>
    encodeURIComponent(options.path?.[name] ?? target.pathValue?.(path, name) ?? '0'),
  );
  const headers: Record<string, string> = {};
  const token = tokenFor(target, operation);
  if (token) headers.authorization = `Bearer ${token}`;
  if (method !== 'get') headers['content-type'] = 'application/json';
  const response = await fetch(`${target.url}${url}${query ? `?${query}` : ''}`, {
    method: method.toUpperCase(),
    headers,
    body: method === 'get' ? undefined : JSON.stringify(options.body ?? {}),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await response.text();
  try {
    return { status: response.status, body: JSON.parse(text) };
  } catch {
    return { status: response.status, body: null }; // not JSON (the widget script)
  }
}

/** A value that breaks a parameter's documented rule, or undefined when it has none to break. */
function breakingValue(schema: any): string | undefined {
  if (!schema) return undefined;
  if (schema.pattern || schema.enum || schema.const !== undefined) return '!';
  if (schema.type === 'integer' || schema.type === 'number') {
    return schema.maximum !== undefined ? String(schema.maximum + 1) : '!';
  }
  return undefined;
}

/** The answer to breaking each documented rule: a parameter's pattern, enum or bound; a body's unknown field. */
async function answersToBrokenRules(target: ApiContractTarget) {
  const answers = [];
  for (const documented of documentedOperations(target.document)) {
    const op = `${documented.method} ${documented.path}`;
    const broken: Array<{ input: string; fields: string[]; request: Parameters<typeof call>[2] }> = [];
    for (const parameter of (documented.operation.parameters ?? []) as any[]) {
      const value = breakingValue(parameter.schema);
      if ((parameter.in !== 'path' && parameter.in !== 'query') || value === undefined) continue;
      broken.push({
        input: `${parameter.in} ${parameter.name}=${value}`,
        fields: [parameter.name],
        request: { [parameter.in]: { [parameter.name]: value } },
      });
    }
    const body = documented.operation.requestBody?.content['application/json'].schema;
    if (documented.operation.requestBody) {
      const fields = ['notAField', ...bodyFields(body)];
      broken.push({ input: 'body { notAField: 1 }', fields, request: { body: { notAField: 1 } } });
    }
    for (const { input, fields, request } of broken) {
      const answer = await call(target, documented, request);
      const { field, rule } = answer.body?.error ?? {};
      answers.push({ op, input, fields, status: answer.status, field, rule });
    }
  }
  return answers;
}

/** The property names a request body schema knows (through oneOf / anyOf / allOf). */
function bodyFields(schema: any): string[] {
  if (!schema || typeof schema !== 'object') return [];
  return [
    ...Object.keys(schema.properties ?? {}),
    ...[...(schema.oneOf ?? []), ...(schema.anyOf ?? []), ...(schema.allOf ?? [])].flatMap(bodyFields),
  ];
}

/** The three checks, as jest expectations. */
export async function expectApiContract(target: ApiContractTarget): Promise<void> {
  const documented = documentedOperationNames(target.document).sort();
  expect(servedApiOperations(target.app).sort()).toEqual(documented);

  const answers = [];
  for (const operation of documentedOperations(target.document)) {
    const { status, body } = await call(target, operation);
    answers.push({
      op: `${operation.method} ${operation.path}`,
      status,
      documented: Object.keys(operation.operation.responses),
      noRoute: status === 404 && String(body?.error?.message ?? '').startsWith('no route for'),
    });
  }
  expect(answers).toHaveLength(documented.length);
  expect(answers.filter((a) => a.noRoute || !a.documented.includes(String(a.status)))).toEqual([]);

  const violations = await answersToBrokenRules(target);
  expect(violations.length).toBeGreaterThan(0);
  expect(
    violations.filter(
      (v) =>
        v.status !== 400 ||
        typeof v.field !== 'string' ||
        !v.fields.includes(v.field) ||
        typeof v.rule !== 'string' ||
        v.rule.length === 0,
    ),
  ).toEqual([]);
}
