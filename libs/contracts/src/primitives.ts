import { type TLiteral, type TProperties, type TSchema, type TUnion, Type } from '@sinclair/typebox';

/** A union of string literals: the same schema as Type.Union of each Type.Literal. */
export const Literals = <const T extends readonly string[]>(values: T): TUnion<TLiteral<T[number]>[]> =>
  Type.Union(values.map((value) => Type.Literal(value)));

/** Decimal USDC amount on the wire: at most 6 decimals ("0.05", "10.004217"). */
export const UsdcAmount = Type.String({
  pattern: '^(0|[1-9][0-9]*)(\\.[0-9]{1,6})?$',
  maxLength: 24,
  // The rule a refused input is named with (libs/http reads x-rule), instead of the bare pattern.
  'x-rule': 'must be a decimal USDC amount with at most 6 decimals, such as "0.05"',
});
/** Signed variant, for balances that may be owed. */
export const SignedUsdcAmount = Type.String({
  pattern: '^-?(0|[1-9][0-9]*)(\\.[0-9]{1,6})?$',
  maxLength: 25,
});
export const Address = Type.String({
  pattern: '^0x[0-9a-fA-F]{40}$',
  'x-rule': 'must be a 0x-prefixed 20-byte hex address',
});
export const TxHash = Type.String({
  pattern: '^0x[0-9a-fA-F]{64}$',
  'x-rule': 'must be a 0x-prefixed 32-byte hex transaction hash',
});
export const IsoTime = Type.String({ format: 'date-time' });
export const Id = Type.String({ minLength: 1, maxLength: 64 });
export const NetworkName = Literals(['base', 'base-sepolia', 'local']);

/** An object schema that refuses any field it does not name. */
export const ClosedObject = <T extends TProperties>(properties: T) =>
  Type.Object(properties, { additionalProperties: false });

export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

/** A string enum as JSON Schema `enum`, so a violation reads "must be one of A, B, C". */
export function StringEnum<const T extends readonly string[]>(
  values: T,
  options: string | { description?: string; default?: T[number] } = {},
) {
  const extra = typeof options === 'string' ? { description: options } : options;
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...extra });
}
