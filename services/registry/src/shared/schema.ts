import { assertValid, HttpError } from '@paygate/http';
import { type Static, type TSchema, type TUnsafe, Type } from '@sinclair/typebox';

/** A string enum as JSON Schema `enum`, so a violation reads "must be one of A, B, C". */
export function StringEnum<const T extends readonly string[]>(
  values: T,
  options: { description?: string; default?: T[number] } = {},
): TUnsafe<T[number]> {
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options });
}

/** Rules a person can read for pattern-checked fields (ajv would print the regular expression). */
const PATTERN_RULES: Record<string, string> = {
  name: 'must be kebab-case: lowercase letters and digits separated by single hyphens',
  path: 'must start with / and contain only URL path segments (letters, digits, . _ ~ -) or whole-segment parameters :name (name matching [A-Za-z_][A-Za-z0-9_]*)',
  payoutAddress: 'must be a 0x-prefixed 20-byte hex address',
  signature: 'must be a 0x-prefixed 65-byte hex signature',
  priceUsdc: 'must be a decimal USDC amount with at most 6 decimals',
  minimumSettlement: 'must be a decimal USDC amount with at most 6 decimals',
  limit: 'must be an integer from 1 to 100',
};

/** assertValid with readable rules for pattern fields. Throws 400 { field, rule }. */
export function parseBody<T extends TSchema>(schema: T, value: unknown, root = 'body'): Static<T> {
  try {
    return assertValid(schema, value, root);
  } catch (error) {
    if (
      error instanceof HttpError &&
      typeof error.details.rule === 'string' &&
      error.details.rule.startsWith('must match')
    ) {
      const field = String(error.details.field ?? root);
      const rule = PATTERN_RULES[field.split('.').pop() ?? ''];
      if (rule) throw new HttpError(400, 'invalid_request', `${field} ${rule}`, { field, rule });
    }
    throw error;
  }
}

export const Address = Type.String({
  pattern: '^0x[0-9a-fA-F]{40}$',
  description: '0x-prefixed 20-byte address',
});
export const UsdcAmountOut = Type.String({
  pattern: '^(0|[1-9][0-9]*)(\\.[0-9]{1,6})?$',
  description: 'decimal USDC amount, e.g. "0.05"',
});
export const UsdcAmountIn = Type.Union([Type.String({ maxLength: 40 }), Type.Number()], {
  description: 'decimal USDC amount as a string ("0.05") or a number (0.05); at most 6 decimals',
});
export const IsoTime = Type.String({ format: 'date-time' });

/** Actions that take no input refuse a body, so a malformed request never changes anything. */
export const EmptyBody = Type.Object({}, { additionalProperties: false });

export function expectNoBody(req: { body?: unknown }, _res: unknown, next: () => void): void {
  if (req.body !== undefined) parseBody(EmptyBody, req.body);
  next();
}
