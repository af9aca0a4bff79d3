import type { Static, TSchema } from '@sinclair/typebox';
import Ajv, { type ErrorObject } from 'ajv';
import addFormats from 'ajv-formats';
import { HttpError, HttpReason } from './errors';
import { findStoredTextViolation } from './stored-text';

// verbose: errors carry the failing schema, whose `x-rule` (if any) is the readable rule of its pattern.
// ajv.compile caches by schema object, so the route schemas compile once.
const ajv = addFormats(new Ajv({ allErrors: false, strict: false, coerceTypes: false, verbose: true }));

type Params = Record<string, unknown>;

/** The rule each keyword's failure reads as; another keyword reads as ajv's message. */
const RULES: Record<string, (params: Params, error: ErrorObject) => string> = {
  required: () => 'is required',
  additionalProperties: () => 'is not an allowed field',
  minLength: (params) => `must be at least ${params.limit} characters`,
  maxLength: (params) => `must be at most ${params.limit} characters`,
  // A pattern reads badly as a rule: a schema may say it in words (`{ pattern, 'x-rule': 'must be kebab-case' }`).
  pattern: (params, error) => {
    const rule = (error.parentSchema as { 'x-rule'?: unknown } | undefined)?.['x-rule'];
    return typeof rule === 'string' ? rule : `must match ${params.pattern}`;
  },
  enum: (params) => `must be one of ${(params.allowedValues as unknown[]).map(String).join(', ')}`,
  const: (params) => `must be ${JSON.stringify(params.allowedValue)}`,
  // A union of literals (TypeBox's Type.Union([Type.Literal('a'), …])) reads as the list of its values.
  anyOf: (_params, error) => {
    const values = literalValues(error.schema);
    return values ? `must be one of ${values.join(', ')}` : 'is not one of the allowed values or types';
  },
};

/** Turns the first ajv error into a field name (dotted path) and a rule a person can read. */
function describeAjvError(error: ErrorObject, root: string): { field: string; rule: string } {
  const path = error.instancePath
    .split('/')
    .filter(Boolean)
    .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'));
  const params = error.params as Params;
  if (error.keyword === 'required') path.push(String(params.missingProperty));
  if (error.keyword === 'additionalProperties') path.push(String(params.additionalProperty));
  // `x-rule` may also name the rule per keyword: `{ pattern: 'must be a settlementId', type: 'must be given once' }`.
  const byKeyword = (error.parentSchema as { 'x-rule'?: unknown } | undefined)?.['x-rule'];
  const named = byKeyword && typeof byKeyword === 'object' ? (byKeyword as Params)[error.keyword] : undefined;
  const rule =
    typeof named === 'string'
      ? named
      : (RULES[error.keyword]?.(params, error) ?? error.message ?? 'is invalid');
  return { field: path.join('.') || root, rule };
}

/** The values of an anyOf whose branches are all literals (`const`); undefined otherwise. */
function literalValues(branches: unknown): string[] | undefined {
  if (!Array.isArray(branches) || branches.length === 0) return undefined;
  if (!branches.every((b) => b !== null && typeof b === 'object' && 'const' in b)) return undefined;
  return branches.map((b) => String((b as { const: unknown }).const));
}

/** Values already held to the stored-text rules (bodies checked by createApp), not walked twice. */
const checkedValues = new WeakSet<object>();

/** Throws a 400 naming the field and the rule when `value` breaks a stored-text rule (stored-text.ts). */
export function assertStoredText(value: unknown, root = 'body'): void {
  const isObject = value !== null && typeof value === 'object';
  if (isObject && checkedValues.has(value)) return;
  const violation = findStoredTextViolation(value, root);
  if (violation)
    throw new HttpError(400, HttpReason.InvalidRequest, `${violation.field} ${violation.rule}`, violation);
  if (isObject) checkedValues.add(value);
}

/** Validates `value` against a TypeBox schema after the stored-text rules; a 400 names field and rule. */
export function assertValid<T extends TSchema>(schema: T, value: unknown, root = 'body'): Static<T> {
  assertStoredText(value, root);
  const validator = ajv.compile(schema);
  if (!validator(value)) {
    const errors = validator.errors ?? [];
    let first = errors[0];
    // A value outside a union of literals fails a branch's `type` or `const` first; the union's own error says it whole.
    const union = errors.find((e) => e.keyword === 'anyOf' && e.instancePath === first?.instancePath);
    if (union && literalValues(union.schema)) first = union;
    const { field, rule } = first ? describeAjvError(first, root) : { field: root, rule: 'is invalid' };
    throw new HttpError(400, HttpReason.InvalidRequest, `${field} ${rule}`, { field, rule });
  }
  return value as Static<T>;
}
