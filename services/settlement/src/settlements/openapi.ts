const errorBody = {
  type: 'object',
  properties: {
    error: {
      type: 'object',
      properties: {
        code: { type: 'string' },
        message: { type: 'string' },
        field: { type: 'string' },
        rule: { type: 'string' },
        requestId: { type: 'string' },
      },
      required: ['code', 'message'],
    },
  },
};

const settlement = {
  type: 'object',
  properties: {
    settlementId: { type: 'string', example: 'stl_01KAQ3T0000X7Q0E4W9T6B2M8C' },
    sellerId: { type: 'string' },
    status: { type: 'string', enum: ['pending', 'skipped', 'sending', 'completed', 'failed'] },
    amount: { type: ['string', 'null'], description: 'USDC paid out (decimal string)', example: '12.25' },
    minimumAmount: { type: 'string', example: '10' },
    availableAmount: {
      type: ['string', 'null'],
      description: 'what was available when the period was skipped below the minimum',
    },
    payoutAddress: { type: 'string' },
    txHash: { type: ['string', 'null'], description: 'on-chain proof of the USDC transfer' },
    period: {
      type: 'object',
      properties: {
        frequency: { type: 'string', enum: ['DAILY', 'WEEKLY', 'MONTHLY'] },
        key: { type: 'string', example: 'D:2026-11-26' },
        start: { type: 'string', format: 'date-time' },
        end: { type: 'string', format: 'date-time' },
      },
    },
    skipReason: { type: ['string', 'null'], enum: ['below_minimum', 'nothing_available', null] },
    failureReason: { type: ['string', 'null'] },
    createdAt: { type: 'string', format: 'date-time' },
    completedAt: { type: ['string', 'null'], format: 'date-time' },
  },
};

const errors = {
  '400': { description: 'bad query', content: { 'application/json': { schema: errorBody } } },
  '401': {
    description: 'missing or unknown API key',
    content: { 'application/json': { schema: errorBody } },
  },
};

export const settlementOpenApi = {
  openapi: '3.1.0',
  info: { title: 'Paygate settlements', version: '1.0.0' },
  components: {
    securitySchemes: { apiKey: { type: 'http', scheme: 'bearer', description: 'sk_… API key' } },
  },
  security: [{ apiKey: [] }],
  paths: {
    '/api/v1/settlements': {
      get: {
        summary: "The calling seller's settlements, newest period first",
        parameters: [
          { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 } },
          {
            name: 'status',
            in: 'query',
            schema: { type: 'string', enum: ['pending', 'skipped', 'sending', 'completed', 'failed'] },
          },
          {
            name: 'starting_after',
            in: 'query',
            schema: { type: 'string' },
            description: 'settlementId cursor',
          },
        ],
        responses: {
          '200': {
            description: 'a page of settlements',
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  properties: {
                    data: { type: 'array', items: settlement },
                    hasMore: { type: 'boolean' },
                    nextCursor: { type: ['string', 'null'] },
                  },
                },
              },
            },
          },
          ...errors,
        },
      },
    },
    '/api/v1/settlements/{settlementId}': {
      get: {
        summary: 'One settlement of the calling seller',
        parameters: [{ name: 'settlementId', in: 'path', required: true, schema: { type: 'string' } }],
        responses: {
          '200': { description: 'the settlement', content: { 'application/json': { schema: settlement } } },
          '404': { description: 'no such settlement for this seller' },
          ...errors,
        },
      },
    },
  },
} as const;
