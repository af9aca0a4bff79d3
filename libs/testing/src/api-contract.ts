/**
 * Checks that a service's OpenAPI document and its express routes are one thing (routes declared once with
 * defineRoute): the document lists exactly the routed operations, every documented operation answers through
 * the real service with a documented status (never express's "no route" 404), and an input breaking a
 * documented rule is refused with a 400 naming the field and the rule. Used by the checkout, escrow-ledger and
 * settlement suites.
 */

import type { Express } from 'express';
import { servedApiOperations } from './routes';

interface ApiContractTarget {
  url: string;
  app: Express;
  document: any;
  /** The bearer token to send for each security scheme the document names. */
  credentials: Record<string, string>;
  /** A value for a path parameter that meets its rule (undefined: `0`). */
  pathValue?: (path: string, name: string) => string | undefined;
  /** Routed operations the document leaves out on purpose (a document served apart from its routes). */
  undocumented?: string[];
}

interface DocumentedOperation {
  method: string;
  /** OpenAPI path, `{id}` for a parameter. */
  path: string;
  operation: any;
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

/** The routed operations, less those left out of the document on purpose. */
function routedOperationNames(target: ApiContractTarget): string[] {
  return servedApiOperations(target.app).filter((op) => !(target.undocumented ?? []).includes(op));
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

function pathWith(target: ApiContractTarget, path: string, values: Record<string, string> = {}): string {
  return path.replace(/\{([^}]+)\}/g, (_m, name: string) =>
    encodeURIComponent(values[name] ?? target.pathValue?.(path, name) ?? '0'),
  );
}

async function call(
  target: ApiContractTarget,
  documented: DocumentedOperation,
  options: { path?: Record<string, string>; query?: Record<string, string>; body?: unknown } = {},
): Promise<{ status: number; body: any; text: string }> {
  const { method, operation } = documented;
  const query = new URLSearchParams(options.query ?? {}).toString();
  const headers: Record<string, string> = {};
  const token = tokenFor(target, operation);
  if (token) headers.authorization = `Bearer ${token}`;
  let body: string | undefined;
  if (method !== 'get') {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(options.body ?? {});
  }
  const response = await fetch(
    `${target.url}${pathWith(target, documented.path, options.path)}${query ? `?${query}` : ''}`,
    { method: method.toUpperCase(), headers, body, signal: AbortSignal.timeout(30_000) },
  );
  const text = await response.text();
  let parsed: any = null;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON (the widget script)
  }
  return { status: response.status, body: parsed, text };
}

/**
 * What each documented operation answers to a plain request (valid credentials, path values, an empty JSON
 * body): `METHOD path -> status`, for a test to compare with the documented statuses.
 */
async function answerOfEveryOperation(
  target: ApiContractTarget,
): Promise<Array<{ op: string; status: number; documented: string[]; noRoute: boolean }>> {
  const answers = [];
  for (const documented of documentedOperations(target.document)) {
    const answer = await call(target, documented);
    answers.push({
      op: `${documented.method} ${documented.path}`,
      status: answer.status,
      documented: Object.keys(documented.operation.responses),
      noRoute: answer.status === 404 && String(answer.body?.error?.message ?? '').startsWith('no route for'),
    });
  }
  return answers;
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

interface Violation {
  op: string;
  input: string;
  /** The fields the answer may name. */
  fields: string[];
  status: number;
  field: unknown;
  rule: unknown;
}

/**
 * For each documented input that has a rule (a path or query parameter with a pattern, enum or bound; each
 * JSON body), a request breaking it: the answers, for a test to expect 400 naming the field and the rule.
 * Bodies get an extra field no schema allows next to the documented required ones left out, so the answer
 * names either the missing field or the extra one.
 */
async function answersToBrokenRules(target: ApiContractTarget): Promise<Violation[]> {
  const answers: Violation[] = [];
  for (const documented of documentedOperations(target.document)) {
    const op = `${documented.method} ${documented.path}`;
    for (const parameter of (documented.operation.parameters ?? []) as any[]) {
      if (parameter.in !== 'path' && parameter.in !== 'query') continue;
      const value = breakingValue(parameter.schema);
      if (value === undefined) continue;
      const answer = await call(
        target,
        documented,
        parameter.in === 'path'
          ? { path: { [parameter.name]: value } }
          : { query: { [parameter.name]: value } },
      );
      answers.push({
        op,
        input: `${parameter.in} ${parameter.name}=${value}`,
        fields: [parameter.name],
        status: answer.status,
        field: answer.body?.error?.field,
        rule: answer.body?.error?.rule,
      });
    }
    if (documented.operation.requestBody) {
      const answer = await call(target, documented, { body: { notAField: 1 } });
      answers.push({
        op,
        input: 'body { notAField: 1 }',
        fields: [
          'notAField',
          ...bodyFields(documented.operation.requestBody.content['application/json'].schema),
        ],
        status: answer.status,
        field: answer.body?.error?.field,
        rule: answer.body?.error?.rule,
      });
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

/**
 * The three checks, as jest expectations: the document lists exactly the routed operations; each documented
 * operation answers a documented status, never "no route"; each broken rule is a 400 naming field and rule.
 */
export async function expectApiContract(target: ApiContractTarget): Promise<void> {
  const documented = documentedOperationNames(target.document).sort();
  expect(routedOperationNames(target).sort()).toEqual(documented);

  const answers = await answerOfEveryOperation(target);
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
