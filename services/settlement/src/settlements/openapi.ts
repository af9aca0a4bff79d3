import { errorResponses, openApiDocument, plainSchema, securitySchemes } from '@paygate/http';
import { SettleNowBody } from './schemas';

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

const errors = errorResponses({ '400': 'bad query', '401': 'missing or unknown API key' });
const seller = [{ apiKey: [] }];

export const settlementOpenApi = openApiDocument({
  title: 'Paygate settlements',
  description:
    "The seller's settlements: one per seller and period (DAILY, WEEKLY or MONTHLY), paid out in USDC from the escrow wallet once the available balance reaches the seller's minimum. Amounts are decimal USDC strings.",
  securitySchemes: { apiKey: securitySchemes.apiKey, operatorToken: securitySchemes.operatorToken },
  paths: {
    '/api/v1/settlements': {
      get: {
        summary: "The calling seller's settlements, newest period first",
        security: seller,
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
        security: seller,
        parameters: [{ name: 'settlementId', in: 'path', required: true, schema: { type: 'string' } }],
        responses: {
          '200': { description: 'the settlement', content: { 'application/json': { schema: settlement } } },
          ...errors,
          ...errorResponses({ '404': 'no such settlement for this seller' }),
        },
      },
    },
    '/api/v1/operator/settlements/run': {
      post: {
        summary: 'Settle one seller or all sellers now (operator)',
        description:
          "Uses the period the scheduler would use now and the same settlement (id derived from seller and period): never two payouts for one seller and period, with the scheduler or with concurrent calls. A period skipped earlier is asked again; a period that already has a payout is reported as already_settled_this_period. waitMs waits for the payouts' confirmation (txHash).",
        security: [{ operatorToken: [] }],
        requestBody: {
          required: true,
          content: { 'application/json': { schema: plainSchema(SettleNowBody) } },
        },
        responses: {
          '200': {
            description: 'what was settled and what was skipped, and why',
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  properties: {
                    settled: { type: 'array', items: settlement },
                    skipped: {
                      type: 'array',
                      items: {
                        type: 'object',
                        properties: {
                          sellerId: { type: 'string' },
                          settlementId: { type: 'string' },
                          reason: {
                            type: 'string',
                            enum: [
                              'below_minimum',
                              'nothing_available',
                              'already_settled_this_period',
                              'ledger_unavailable',
                            ],
                          },
                          status: {
                            type: 'string',
                            enum: ['pending', 'skipped', 'sending', 'completed', 'failed'],
                          },
                          availableAmount: { type: ['string', 'null'] },
                          txHash: { type: ['string', 'null'] },
                        },
                      },
                    },
                    truncated: { type: 'boolean' },
                  },
                },
              },
            },
          },
          ...errorResponses({
            '400': 'neither or both of sellerId and all, or waitMs out of range',
            '401': 'operator token required',
            '404': 'unknown seller',
          }),
        },
      },
    },
  },
});
