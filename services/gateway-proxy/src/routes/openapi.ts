import {
  type AnyRoute,
  errorResponses,
  openApiDocument,
  routesOpenApiPaths,
  securitySchemes,
} from '@paygate/http';
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
    claimedBy: {
      type: 'string',
      enum: ['x402', 'verify', 'checkout', 'operator_refund'],
      description:
        'with payment_already_used when another payment path spent the transfer (one on-chain transfer buys one thing)',
    },
    requirements: paymentRequirements,
  },
};

const paymentHeaderDoc =
  'Base64 of JSON { txHash, amount, token, network, from, to, signature }; signature = EIP-191 personal_sign by `from` of "Paygate payment\\ntx: <txHash lowercase>\\nresource: <resource from the 402>".';

/**
 * The gateway's OpenAPI 3.1 document, served at /api/v1/openapi/gateway.json: its express routes describe
 * themselves (`routes`); the paid skill URLs, answered ahead of express on the bare request, are described here.
 */
export function gatewayOpenApi(baseUrl: string, routes: AnyRoute[]) {
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
          {
            name: 'PAYMENT-SIGNATURE',
            in: 'header',
            required: false,
            schema: { type: 'string' },
            description: 'x402 v2 payment: base64 JSON with an EIP-3009 authorization (docs/x402.md)',
          },
          {
            name: 'X-PAYMENT',
            in: 'header',
            required: false,
            schema: { type: 'string' },
            description: 'x402 v1 payment (Base and Base Sepolia)',
          },
        ],
        get: {
          summary:
            "Call a paid endpoint (the method is the endpoint's configured one: GET, POST, PUT, PATCH or DELETE)",
          responses: {
            '200': {
              description:
                "PROXY: the seller's answer, streamed, with X-402-Receipt: <txHash> (and PAYMENT-RESPONSE / X-PAYMENT-RESPONSE when paid with x402). TICKET: { ticket, header, expiresAt, url, method, txHash, payer } with X-402-Mode: TICKET; call url with X-402-Ticket: <ticket>.",
            },
            ...errorResponses({ '400': 'malformed payment header' }),
            '402': {
              description:
                'no proof (PaymentRequirements; with x402 the PAYMENT-REQUIRED header) or a refused proof (PaymentRefused; x402 reason codes for x402 payments)',
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
      ...routesOpenApiPaths(routes),
    },
  });
}
