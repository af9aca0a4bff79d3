import { Nullable, StringEnum } from '@paygate/contracts';
import { Type } from '@sinclair/typebox';
import { FREQUENCIES, SETTLEMENT_STATUSES } from '../db';
import { SettleNowSkip, SkipReasons } from '../reasons';

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

export const SETTLEMENT_ID_PATTERN = '^stl_[0-9A-HJKMNP-TV-Z]{26}$';

/** A query value given twice arrives as an array: the rule says so. */
const GIVEN_ONCE = 'must be given once, as a string';

export const SettlementListQuery = Type.Object({
  limit: Type.Optional(
    Type.String({
      pattern: '^(0{0,2}[1-9]|0?[1-9][0-9]|100)$',
      'x-rule': { pattern: 'must be an integer between 1 and 100', type: GIVEN_ONCE },
      description: 'page size, 1 to 100 (default 20)',
      examples: ['20'],
    }),
  ),
  status: Type.Optional(
    Type.Unsafe<(typeof SETTLEMENT_STATUSES)[number]>({
      type: 'string',
      enum: [...SETTLEMENT_STATUSES],
      'x-rule': { type: GIVEN_ONCE },
    }),
  ),
  starting_after: Type.Optional(
    Type.String({
      pattern: SETTLEMENT_ID_PATTERN,
      'x-rule': { pattern: 'must be a settlementId (stl_…)', type: GIVEN_ONCE },
      description: 'settlementId cursor (nextCursor of the previous page)',
    }),
  ),
});

export const SettlementIdParam = Type.Object({
  settlementId: Type.String({ pattern: SETTLEMENT_ID_PATTERN, 'x-rule': 'must be a settlementId (stl_…)' }),
});

export const Settlement = Type.Object({
  settlementId: Type.String({ examples: ['stl_01KAQ3T0000X7Q0E4W9T6B2M8C'] }),
  sellerId: Type.String(),
  status: StringEnum(SETTLEMENT_STATUSES),
  amount: Nullable(Type.String({ description: 'USDC paid out (decimal string)', examples: ['12.25'] })),
  minimumAmount: Type.String({ examples: ['10'] }),
  availableAmount: Nullable(
    Type.String({ description: 'what was available when the period was skipped below the minimum' }),
  ),
  payoutAddress: Type.String(),
  txHash: Nullable(Type.String({ description: 'on-chain proof of the USDC transfer' })),
  period: Type.Object({
    frequency: StringEnum(FREQUENCIES),
    key: Type.String({ examples: ['D:2026-11-26'] }),
    start: Type.String({ format: 'date-time' }),
    end: Type.String({ format: 'date-time' }),
  }),
  skipReason: Nullable(StringEnum(Object.values(SkipReasons))),
  failureReason: Nullable(Type.String()),
  createdAt: Type.String({ format: 'date-time' }),
  completedAt: Nullable(Type.String({ format: 'date-time' })),
});

export const SettlementPage = Type.Object(
  { data: Type.Array(Settlement), hasMore: Type.Boolean(), nextCursor: Nullable(Type.String()) },
  { description: 'a page of settlements' },
);

export const SettleNowAnswer = Type.Object(
  {
    settled: Type.Array(Settlement),
    skipped: Type.Array(
      Type.Object({
        sellerId: Type.String(),
        settlementId: Type.String(),
        reason: StringEnum(Object.values(SettleNowSkip)),
        status: StringEnum(SETTLEMENT_STATUSES),
        availableAmount: Nullable(Type.String()),
        txHash: Nullable(Type.String()),
      }),
    ),
    truncated: Type.Boolean({ description: 'all stopped at its bound: run it again for the rest' }),
  },
  { description: 'what was settled and what was skipped, and why' },
);
