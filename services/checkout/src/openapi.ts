import { CheckoutSessionSnapshot } from '@paygate/contracts';
import {
  errorResponses,
  idempotencyKeyParameter,
  jsonRequestBody,
  jsonResponse,
  openApiDocument,
  plainSchema,
  schemaParameters,
  securitySchemes,
  serveOpenApi,
} from '@paygate/http';
import { type TSchema, Type } from '@sinclair/typebox';
import type { Express } from 'express';
import { AttachBody, RefundBody, TransferIdParam, TransferListQuery } from './operator/routes';
import { PublishableSessionBody, SecretSessionBody, SessionIdParam } from './sessions/schemas';

export const OPENAPI_PATH = '/api/v1/openapi/checkout.json';

const Nullable = (schema: TSchema) => Type.Union([schema, Type.Null()]);
const TransferView = Type.Object({
  transferId: Type.String({ pattern: '^tr_[0-9a-f]{24}$' }),
  status: Type.Union(
    ['matched', 'unmatched', 'attached', 'refund_requested', 'reorged', 'claimed'].map((s) =>
      Type.Literal(s),
    ),
    {
      description:
        "claimed: another channel (an x402 proof, a seller's /api/verify) spent the transfer at the ledger; it is a payment, not unmatched money",
    },
  ),
  reason: Nullable(
    Type.Union(
      [
        'no_session_with_this_amount',
        'session_already_paid',
        'late_window_passed',
        'wrong_token',
        'wrong_recipient',
        'wrong_chain',
        'claimed_by_x402',
        'claimed_by_verify',
      ].map((s) => Type.Literal(s)),
    ),
  ),
  candidateSessionId: Nullable(Type.String()),
  sessionId: Nullable(Type.String()),
  chainId: Type.Integer(),
  network: Type.String(),
  txHash: Type.String(),
  logIndex: Type.Integer(),
  blockNumber: Type.Integer(),
  from: Type.String(),
  to: Type.String(),
  token: Type.String(),
  amount: Type.String({ description: 'USDC received (decimal string, 6 decimals)', examples: ['5.01'] }),
  note: Nullable(Type.String()),
  refundRequestId: Nullable(
    Type.String({
      pattern: '^trr_[0-9a-f]{24}$',
      description:
        'set when an operator marked the transfer for refund: the id carried by transfer.refund_requested',
    }),
  ),
  observedAt: Type.String({ format: 'date-time' }),
  resolvedAt: Nullable(Type.String({ format: 'date-time' })),
});

const idempotencyKey = idempotencyKeyParameter(
  'Per seller: the same key with the same body returns the same session (200, Idempotent-Replayed: true); with another body, 409 idempotency_key_reused.',
);

/** The OpenAPI 3.1 description of checkout's HTTP API, built from the schemas the routes validate with. */
export function checkoutOpenApi() {
  return openApiDocument({
    title: 'Paygate checkout',
    description:
      'Checkout sessions with unique exact amounts (price + a random micro-USDC suffix) paid to one shared escrow wallet, the polling route of the widget, and the operator resolution of transfers that matched no session. Live updates come over the notifier WebSocket (/api/v1/openapi/notifier.json).',
    securitySchemes: {
      publishableKey: securitySchemes.publishableKey,
      secretKey: securitySchemes.apiKey,
      operatorToken: securitySchemes.operatorToken,
    },
    schemas: { CheckoutSession: CheckoutSessionSnapshot, Transfer: TransferView },
    paths: {
      '/api/v1/checkout/sessions': {
        post: {
          operationId: 'createCheckoutSession',
          summary: 'Create a checkout session with a unique exact amount',
          description:
            'With a publishable key (pk_…) the body names a skill (and endpoint) and the price comes from the registry; the browser cannot name an amount. With a secret key (sk_…) the seller’s server names any amount.',
          security: [{ publishableKey: [] }, { secretKey: [] }],
          parameters: [idempotencyKey],
          requestBody: {
            required: true,
            content: {
              'application/json': {
                schema: { oneOf: [plainSchema(PublishableSessionBody), plainSchema(SecretSessionBody)] },
                examples: {
                  widget: { summary: 'pk_… key', value: { skill: 'weather-report' } },
                  server: {
                    summary: 'sk_… key',
                    value: { amount: '12.50', description: 'Order #42', holdPeriodHours: 0 },
                  },
                },
              },
            },
          },
          responses: {
            '201': jsonResponse(CheckoutSessionSnapshot, 'the new session'),
            '200': jsonResponse(
              CheckoutSessionSnapshot,
              'replayed: the session created earlier with this Idempotency-Key',
            ),
            ...errorResponses({
              '400': 'invalid_request (field and rule named)',
              '401':
                'missing_key | invalid_key | invalid_publishable_key | unknown_publishable_key | invalid_api_key | unknown_api_key',
              '404': 'skill_not_found | endpoint_not_found',
              '409': 'skill_not_active | endpoint_not_priced | idempotency_key_reused',
              '503':
                'amount_range_exhausted: every suffix of this price is held by a session a payment could still match; retry later',
            }),
          },
        },
      },
      '/api/v1/checkout/sessions/{id}': {
        get: {
          operationId: 'getCheckoutSession',
          summary: 'The session (the widget’s polling route; the session id is the capability)',
          parameters: schemaParameters('path', SessionIdParam),
          responses: {
            '200': jsonResponse(
              CheckoutSessionSnapshot,
              'the session; an open session past expiresAt is expired on read',
            ),
            ...errorResponses({ '400': 'malformed session id', '404': 'no such session' }),
          },
        },
      },
      '/api/v1/operator/transfers': {
        get: {
          operationId: 'listTransfers',
          summary: 'Transfers into the escrow wallet by status (default unmatched), newest first',
          security: [{ operatorToken: [] }],
          parameters: schemaParameters('query', TransferListQuery),
          responses: {
            '200': jsonResponse(Type.Object({ transfers: Type.Array(TransferView) }), 'the transfers'),
            ...errorResponses({ '400': 'bad query', '401': 'operator token required' }),
          },
        },
      },
      '/api/v1/operator/transfers/{transferId}/attach': {
        post: {
          operationId: 'attachTransfer',
          summary:
            'Apply a transfer to a session: paid / paid_late (equal), underpaid (less), overpaid (more)',
          security: [{ operatorToken: [] }],
          parameters: schemaParameters('path', TransferIdParam, { rename: { id: 'transferId' } }),
          requestBody: jsonRequestBody(AttachBody),
          responses: {
            '200': jsonResponse(
              Type.Object({ transfer: TransferView, session: CheckoutSessionSnapshot }),
              'the attached transfer and the session’s new state',
            ),
            ...errorResponses({
              '400': 'invalid_request',
              '401': 'operator token required',
              '404': 'not_found (transfer, or sessionId)',
              '409':
                'transfer_not_unmatched | session_already_paid | transfer_claimed_by_payment (the ledger says another channel spent the transfer: it becomes claimed; `claimedBy` names the channel)',
              '503': 'ledger_unavailable (the ledger did not answer the claim; nothing changed, retry)',
            }),
          },
        },
      },
      '/api/v1/operator/transfers/{transferId}/refund': {
        post: {
          operationId: 'refundTransfer',
          summary: 'Send an unmatched transfer back to its sender',
          description:
            "Asks the ledger first (ledger.claim_transfer, channel operator_refund): a transfer that a payment claimed (an x402 proof, a seller's /api/verify) is refused here with 409 transfer_claimed_by_payment and recorded as claimed, never marked. Otherwise marks the transfer refund_requested and publishes transfer.refund_requested in the same transaction. The ledger books the amount out of suspense into a refund (refused, and listed in its operator conflicts, if a payment already claimed the transfer or it left the chain); settlement sends the USDC back to `from`. Once per transfer: a second call is 409 and publishes nothing. Transfers that are not USDC into this escrow wallet on this chain (wrong_token, wrong_recipient, wrong_chain) are not on the books and are refused.",
          security: [{ operatorToken: [] }],
          parameters: schemaParameters('path', TransferIdParam, { rename: { id: 'transferId' } }),
          requestBody: jsonRequestBody(RefundBody, { required: false }),
          responses: {
            '200': jsonResponse(
              Type.Object({ transfer: TransferView }),
              'the transfer, now refund_requested, with its refundRequestId',
            ),
            ...errorResponses({
              '400': 'invalid_request',
              '401': 'operator token required',
              '404': 'no such transfer',
              '409':
                "transfer_not_unmatched (already resolved or marked) | transfer_not_refundable (wrong_token, wrong_recipient, wrong_chain) | transfer_claimed_by_payment (a payment spent it; `claimedBy` names the channel, the transfer is now claimed) | transfer_reorged | amount_differs | payer_differs (the ledger's books disagree)",
              '503': 'ledger_unavailable (the ledger did not answer; nothing changed, retry)',
            }),
          },
        },
      },
      [OPENAPI_PATH]: {
        get: {
          operationId: 'checkoutOpenApi',
          summary: 'This document',
          responses: { '200': { description: 'OpenAPI 3.1 document' } },
        },
      },
      '/static/paygate-checkout.js': {
        get: {
          operationId: 'widgetScript',
          summary: 'The checkout widget as a classic script (global PaygateCheckout)',
          responses: { '200': { description: 'JavaScript', content: { 'text/javascript': {} } } },
        },
      },
      '/static/paygate-checkout.mjs': {
        get: {
          operationId: 'widgetModule',
          summary: 'The checkout widget as an ES module',
          responses: { '200': { description: 'JavaScript', content: { 'text/javascript': {} } } },
        },
      },
    },
  });
}

export function openApiRoute(app: Express): void {
  serveOpenApi(app, OPENAPI_PATH, checkoutOpenApi());
}
