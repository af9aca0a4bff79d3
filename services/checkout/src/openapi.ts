import { CheckoutSessionSnapshot } from '@paygate/contracts';
import { type TObject, type TSchema, Type } from '@sinclair/typebox';
import type { Express } from 'express';
import { AttachBody, RefundBody, TransferIdParam, TransferListQuery } from './operator/routes';
import { PublishableSessionBody, SecretSessionBody, SessionIdParam } from './sessions/schemas';

export const OPENAPI_PATH = '/api/v1/openapi/checkout.json';

const ErrorBody = Type.Object({
  error: Type.Object({
    code: Type.String(),
    message: Type.String(),
    field: Type.Optional(Type.String()),
    rule: Type.Optional(Type.String()),
    requestId: Type.String(),
  }),
});

const Nullable = (schema: TSchema) => Type.Union([schema, Type.Null()]);
const TransferView = Type.Object({
  transferId: Type.String({ pattern: '^tr_[0-9a-f]{24}$' }),
  status: Type.Union(
    ['matched', 'unmatched', 'attached', 'refund_requested', 'reorged'].map((s) => Type.Literal(s)),
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

/** TypeBox schemas are JSON Schema 2020-12 (OpenAPI 3.1's dialect); JSON drops TypeBox's symbol keys. */
const plain = (schema: TSchema): Record<string, unknown> => JSON.parse(JSON.stringify(schema));
const json = (schema: TSchema, description: string) => ({
  description,
  content: { 'application/json': { schema: plain(schema) } },
});
const errors = (entries: Record<string, string>) =>
  Object.fromEntries(Object.entries(entries).map(([status, text]) => [status, json(ErrorBody, text)]));
/** Query or path parameters from the TypeBox object that validates them. */
const parameters = (where: 'query' | 'path', schema: TObject, rename: Record<string, string> = {}) =>
  Object.entries(schema.properties).map(([name, property]) => ({
    name: rename[name] ?? name,
    in: where,
    required: where === 'path' || (schema.required ?? []).includes(name),
    schema: plain(property),
  }));

const idempotencyKey = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description:
    'Per seller: the same key with the same body returns the same session (200, Idempotent-Replayed: true); with another body, 409 idempotency_key_reused.',
  schema: { type: 'string', pattern: '^[\\x21-\\x7e]{1,255}$' },
};

/** The OpenAPI 3.1 description of checkout's HTTP API, built from the schemas the routes validate with. */
export function checkoutOpenApi() {
  return {
    openapi: '3.1.0',
    info: {
      title: 'Paygate checkout',
      version: '1.0.0',
      description:
        'Checkout sessions with unique exact amounts (price + a random micro-USDC suffix) paid to one shared escrow wallet, the polling route of the widget, and the operator resolution of transfers that matched no session. Live updates come over the notifier WebSocket (/api/v1/openapi/notifier.json).',
    },
    components: {
      securitySchemes: {
        publishableKey: { type: 'http', scheme: 'bearer', description: 'pk_… publishable key (the widget)' },
        secretKey: { type: 'http', scheme: 'bearer', description: 'sk_… API key (the seller’s server)' },
        operatorToken: { type: 'http', scheme: 'bearer', description: 'OPERATOR_TOKEN' },
      },
      schemas: {
        CheckoutSession: plain(CheckoutSessionSnapshot),
        Transfer: plain(TransferView),
        Error: plain(ErrorBody),
      },
    },
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
                schema: { oneOf: [plain(PublishableSessionBody), plain(SecretSessionBody)] },
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
            '201': json(CheckoutSessionSnapshot, 'the new session'),
            '200': json(
              CheckoutSessionSnapshot,
              'replayed: the session created earlier with this Idempotency-Key',
            ),
            ...errors({
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
          parameters: parameters('path', SessionIdParam),
          responses: {
            '200': json(
              CheckoutSessionSnapshot,
              'the session; an open session past expiresAt is expired on read',
            ),
            ...errors({ '400': 'malformed session id', '404': 'no such session' }),
          },
        },
      },
      '/api/v1/operator/transfers': {
        get: {
          operationId: 'listTransfers',
          summary: 'Transfers into the escrow wallet by status (default unmatched), newest first',
          security: [{ operatorToken: [] }],
          parameters: parameters('query', TransferListQuery),
          responses: {
            '200': json(Type.Object({ transfers: Type.Array(TransferView) }), 'the transfers'),
            ...errors({ '400': 'bad query', '401': 'operator token required' }),
          },
        },
      },
      '/api/v1/operator/transfers/{transferId}/attach': {
        post: {
          operationId: 'attachTransfer',
          summary:
            'Apply a transfer to a session: paid / paid_late (equal), underpaid (less), overpaid (more)',
          security: [{ operatorToken: [] }],
          parameters: parameters('path', TransferIdParam, { id: 'transferId' }),
          requestBody: { required: true, content: { 'application/json': { schema: plain(AttachBody) } } },
          responses: {
            '200': json(
              Type.Object({ transfer: TransferView, session: CheckoutSessionSnapshot }),
              'the attached transfer and the session’s new state',
            ),
            ...errors({
              '400': 'invalid_request',
              '401': 'operator token required',
              '404': 'not_found (transfer, or sessionId)',
              '409': 'transfer_not_unmatched | session_already_paid',
            }),
          },
        },
      },
      '/api/v1/operator/transfers/{transferId}/refund': {
        post: {
          operationId: 'refundTransfer',
          summary: 'Send an unmatched transfer back to its sender',
          description:
            'Marks the transfer refund_requested and publishes transfer.refund_requested in the same transaction. The ledger books the amount out of suspense into a refund (refused, and listed in its operator conflicts, if a payment already claimed the transfer or it left the chain); settlement sends the USDC back to `from`. Once per transfer: a second call is 409 and publishes nothing. Transfers that are not USDC into this escrow wallet on this chain (wrong_token, wrong_recipient, wrong_chain) are not on the books and are refused.',
          security: [{ operatorToken: [] }],
          parameters: parameters('path', TransferIdParam, { id: 'transferId' }),
          requestBody: { required: false, content: { 'application/json': { schema: plain(RefundBody) } } },
          responses: {
            '200': json(
              Type.Object({ transfer: TransferView }),
              'the transfer, now refund_requested, with its refundRequestId',
            ),
            ...errors({
              '400': 'invalid_request',
              '401': 'operator token required',
              '404': 'no such transfer',
              '409':
                'transfer_not_unmatched (already resolved or marked) | transfer_not_refundable (wrong_token, wrong_recipient, wrong_chain)',
            }),
          },
        },
      },
      '/api/v1/openapi/checkout.json': {
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
  };
}

export function openApiRoute(app: Express): void {
  const document = JSON.stringify(checkoutOpenApi());
  app.get(OPENAPI_PATH, (_req, res) => {
    res.setHeader('Access-Control-Allow-Origin', '*');
    res.type('application/json').send(document);
  });
}
