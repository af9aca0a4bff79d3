import { Type } from '@sinclair/typebox';

export const MAX_SETTLE_WAIT_MS = 60_000;

export const SettleNowBody = Type.Object(
  {
    sellerId: Type.Optional(
      Type.String({ minLength: 1, maxLength: 64, description: 'settle this seller (sel_…)' }),
    ),
    all: Type.Optional(Type.Literal(true, { description: 'settle every seller' })),
    waitMs: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: MAX_SETTLE_WAIT_MS,
        description: 'wait up to this long for the payouts to be confirmed on chain (txHash); default 0',
      }),
    ),
  },
  { additionalProperties: false },
);
