import { badRequest } from '@paygate/http';
import { MoneyFormatError, parseUsdc } from '@paygate/money';
import { type SchemaOptions, type TSchema, Type } from '@sinclair/typebox';

export { StringEnum } from '@paygate/contracts';

export const Address = Type.String({
  pattern: '^0x[0-9a-fA-F]{40}$',
  'x-rule': 'must be a 0x-prefixed 20-byte hex address',
  description: '0x-prefixed 20-byte address',
});
export const UsdcAmountOut = Type.String({
  pattern: '^(0|[1-9][0-9]*)(\\.[0-9]{1,6})?$',
  description: 'decimal USDC amount, e.g. "0.05"',
});
export const UsdcAmountIn = Type.Union([Type.String({ maxLength: 40 }), Type.Number()], {
  description:
    'decimal USDC amount as a string ("0.05") or a number (0.05); at most 6 decimals, and a number with a fraction at most 15 significant digits (JSON carries no more exactly)',
});
/** A UsdcAmountIn value as micro-USDC; a malformed one is a 400 naming the field and the rule it breaks. */
export function parseUsdcAmountIn(field: string, input: string | number): bigint {
  try {
    return parseUsdc(input);
  } catch (error) {
    if (error instanceof MoneyFormatError) throw badRequest(field, error.rule);
    throw error;
  }
}

export const IsoTime = Type.String({ format: 'date-time' });

/** A value or null, `options` (its description) on the union. */
export const Nullable = <T extends TSchema>(schema: T, options?: SchemaOptions) =>
  Type.Union([schema, Type.Null()], options);

/** A response whose body is text of `contentType` (not JSON). */
export const textResponse = (description: string, contentType: string) => ({
  description,
  contentType,
  schema: { type: 'string' },
});

/** Actions that take no input refuse a body, so a malformed request never changes anything. */
const EmptyBody = Type.Object({}, { additionalProperties: false });
/** A route's `body` when it takes none (spread into defineRoute). */
export const NoBody = { body: EmptyBody, bodyOptional: true } as const;
