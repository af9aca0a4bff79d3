import { errorResponses, openApiDocument, securitySchemes } from '@paygate/http';
import { VerifyRequest } from './verify';

const paymentRequirements = {
  type: 'object',
  description:
    'HTTP 402 body: SPEC fields (price, description, network, type-specific) plus what an agent needs to pay.',
  properties: {
    price: { type: 'string', example: '0.05' },
    description: { type: 'string' },
    network: { type: 'string', enum: ['base', 'base-sepolia', 'local'] },
    chainId: { type: 'integer', example: 8453 },
    payTo: { type: 'string', description: 'escrow wallet' },
    asset: { type: 'string', description: 'USDC contract' },
    resource: { type: 'string', example: 'GET https://paygate.example/api/v1/skills/weather/forecast' },
    confirmations: { type: 'integer' },
    type: { type: 'string', enum: ['payPerCall', 'subscription', 'product', 'service'] },
    durationDays: { type: 'integer' },
    accessUrl: { type: 'string' },
    requiresShipping: { type: 'boolean' },
    header: { type: 'string', example: 'X-402-Payment' },
    mode: { type: 'string', enum: ['PROXY', 'TICKET'] },
  },
  required: [
    'price',
    'description',
    'network',
    'chainId',
    'payTo',
    'asset',
    'resource',
    'confirmations',
    'type',
  ],
};

const paymentRefused = {
  type: 'object',
  properties: {
    error: { type: 'string', example: 'Invalid payment' },
    reason: {
      type: 'string',
      enum: [
        'wrong_network',
        'wrong_token',
        'wrong_recipient',
        'insufficient_amount',
        'invalid_signature',
        'transfer_not_found',
        'transaction_failed',
        'insufficient_confirmations',
        'payment_already_used',
        'subscription_expired',
      ],
    },
    message: { type: 'string' },
    requirements: paymentRequirements,
  },
};

const paymentHeaderDoc =
  'Base64 of JSON { txHash, amount, token, network, from, to, signature }; signature = EIP-191 personal_sign by `from` of "Paygate payment\\ntx: <txHash lowercase>\\nresource: <resource from the 402>".';

/** The gateway's OpenAPI 3.1 document, served at /api/v1/openapi/gateway.json. */
export function gatewayOpenApi(baseUrl: string) {
  return openApiDocument({
    title: 'Paygate gateway',
    description:
      'Paid skill URLs (x402 payment-required flow, PROXY and TICKET modes), payment verification for the seller middleware, and the ticket JWKS.',
    serverUrl: baseUrl,
    securitySchemes: { apiKey: securitySchemes.apiKey },
    schemas: { PaymentRequirements: paymentRequirements, PaymentRefused: paymentRefused, VerifyRequest },
    paths: {
      '/api/v1/skills/{skillName}/{path}': {
        parameters: [
          { name: 'skillName', in: 'path', required: true, schema: { type: 'string' } },
          {
            name: 'path',
            in: 'path',
            required: true,
            schema: { type: 'string' },
            description: 'the endpoint path',
          },
          {
            name: 'X-402-Payment',
            in: 'header',
            required: false,
            schema: { type: 'string' },
            description: paymentHeaderDoc,
          },
          {
            name: 'Payment',
            in: 'header',
            required: false,
            schema: { type: 'string' },
            description: 'fallback name of X-402-Payment',
          },
        ],
        get: {
          summary:
            "Call a paid endpoint (the method is the endpoint's configured one: GET, POST, PUT, PATCH or DELETE)",
          responses: {
            '200': {
              description:
                "PROXY: the seller's answer, streamed, with X-402-Receipt: <txHash>. TICKET: { ticket, header, expiresAt, url, method, txHash, payer } with X-402-Mode: TICKET; call url with X-402-Ticket: <ticket>.",
            },
            ...errorResponses({ '400': 'malformed payment header' }),
            '402': {
              description: 'no proof (PaymentRequirements) or a refused proof (PaymentRefused)',
              content: { 'application/json': { schema: { oneOf: [paymentRequirements, paymentRefused] } } },
            },
            ...errorResponses({ '404': 'unknown or inactive skill, or unknown path' }),
            ...errorResponses({ '405': 'wrong method (Allow header names the right one)' }),
            ...errorResponses({
              '429': 'over 60 requests per minute per wallet per skill; Retry-After says when',
            }),
            ...errorResponses({
              '502':
                'the seller failed; the payment stays usable for a retry of the same resource until retryUntil (X-402-Retry-Until)',
            }),
            '504': { description: 'the seller timed out; same retry rule as 502' },
          },
        },
        head: {
          summary: 'Validation ping: 200 with X-402-Price, nothing charged or forwarded',
          responses: { '200': { description: 'endpoint exists' }, '404': { description: 'no endpoint' } },
        },
      },
      '/api/verify': {
        get: {
          summary:
            'Payment parameters (network, chainId, payTo, asset, confirmations, issuer, jwksUrl) for 402 bodies',
          responses: { '200': { description: 'parameters' } },
        },
        post: {
          summary:
            "Verify a payment for the seller middleware; a valid payment is credited to the API key's seller",
          security: [{ apiKey: [] }],
          requestBody: {
            required: true,
            content: {
              'application/json': {
                schema: VerifyRequest,
                example: {
                  payment: '<X-402-Payment value>',
                  price: '0.05',
                  type: 'payPerCall',
                  resource: 'GET https://api.seller.example/weather',
                },
              },
            },
          },
          responses: {
            '200': {
              description: 'valid or invalid',
              content: {
                'application/json': {
                  schema: {
                    oneOf: [
                      {
                        type: 'object',
                        properties: {
                          valid: { const: true },
                          payment: {
                            type: 'object',
                            description: 'becomes req.x402',
                            properties: {
                              txHash: { type: 'string' },
                              amount: { type: 'string' },
                              payer: { type: 'string' },
                              network: { type: 'string' },
                              type: { type: 'string' },
                              durationDays: { type: 'integer' },
                              expiresAt: { type: 'string', format: 'date-time' },
                              requiresShipping: { type: 'boolean' },
                              reused: { type: 'boolean' },
                            },
                          },
                        },
                      },
                      {
                        type: 'object',
                        properties: {
                          valid: { const: false },
                          reason: {
                            type: 'string',
                            description: 'malformed_payment or a PaymentRefused reason',
                          },
                          message: { type: 'string' },
                        },
                      },
                    ],
                  },
                },
              },
            },
            ...errorResponses({ '400': 'bad body (field and rule named)' }),
            ...errorResponses({ '401': 'missing or unknown API key' }),
            ...errorResponses({ '429': 'rate limited' }),
            ...errorResponses({ '503': 'chain or key registry unavailable; retry' }),
          },
        },
      },
      '/.well-known/jwks.json': {
        get: {
          summary: 'ES256 public keys of TICKET JWTs, by kid (old keys stay for rotation)',
          responses: { '200': { description: '{ keys: JWK[] }' } },
        },
      },
    },
  });
}
