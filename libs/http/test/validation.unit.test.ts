import { Type } from '@sinclair/typebox';
import { assertValid, HttpError } from '../src';

/** The field and rule of the 400 that assertValid throws for `value`. */
function refusal(schema: Parameters<typeof assertValid>[0], value: unknown, root = 'body') {
  try {
    assertValid(schema, value, root);
  } catch (error) {
    expect(error).toBeInstanceOf(HttpError);
    const { status, details, message } = error as HttpError;
    return { status, field: details?.field, rule: details?.rule, message };
  }
  throw new Error('assertValid accepted the value');
}

describe('assertValid rules a person can read', () => {
  it('a value outside a union of literals lists the allowed values (not "must be equal to constant")', () => {
    const schema = Type.Object({
      type: Type.Union([Type.Literal('payPerCall'), Type.Literal('subscription'), Type.Literal('product')]),
    });
    expect(refusal(schema, { type: 'weird' })).toEqual({
      status: 400,
      field: 'type',
      rule: 'must be one of payPerCall, subscription, product',
      message: 'type must be one of payPerCall, subscription, product',
    });
    expect(
      refusal(
        Type.Object({ status: Type.Union([Type.Literal('open'), Type.Literal('paid')]) }),
        { status: 1 },
        'query',
      ),
    ).toMatchObject({
      field: 'status',
      rule: 'must be one of open, paid',
    });
  });

  it('a single literal names its value; a union of other kinds keeps its own first rule', () => {
    expect(refusal(Type.Object({ all: Type.Literal(true) }), { all: false })).toMatchObject({
      field: 'all',
      rule: 'must be true',
    });
    const price = Type.Object({ price: Type.Union([Type.String({ pattern: '^[0-9]+$' }), Type.Number()]) });
    expect(refusal(price, { price: 'x' })).toMatchObject({ field: 'price', rule: 'must match ^[0-9]+$' });
    expect(assertValid(price, { price: '5' })).toEqual({ price: '5' });
  });
});
