import { securitySchemes } from '@paygate/http';
import { VerifyRequest } from './verify';

export const paymentRequirements = {
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

export const paymentRefused = {
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

export const paymentHeaderDoc =
  'Base64 of JSON { txHash, amount, token, network, from, to, signature }; signature = EIP-191 personal_sign by `from` of "Paygate payment\\ntx: <txHash lowercase>\\nresource: <resource from the 402>".';

/**
 * The gateway's OpenAPI 3.1 document, served at /api/v1/openapi/gateway.json: every route describes itself,
 * the paid skill URLs (served on the bare request) among them.
 */
export function gatewayOpenApi(baseUrl: string) {
  return {
    title: 'Paygate gateway',
    description:
      'Paid skill URLs (x402 payment-required flow, PROXY and TICKET modes), payment verification for the seller middleware, and the ticket JWKS.',
    serverUrl: baseUrl,
    securitySchemes: { apiKey: securitySchemes.apiKey },
    schemas: { PaymentRequirements: paymentRequirements, PaymentRefused: paymentRefused, VerifyRequest },
  };
}
