import { CheckoutSessionSnapshot, SUBJECTS } from '@paygate/contracts';
import {
  errorResponses,
  jsonResponse,
  openApiDocument,
  plainSchema,
  schemaParameters,
  securitySchemes,
  serveOpenApi,
} from '@paygate/http';
import { type TSchema, Type } from '@sinclair/typebox';
import type { Express } from 'express';
import { WEBSOCKET_PATH } from './live/hub';
import { SESSION_ID_PATTERN } from './live/protocol';
import { WEBHOOK_EVENT_TYPES } from './webhooks/payload';

export const OPENAPI_PATH = '/api/v1/openapi/notifier.json';

// The same rules as the webhook routes' validators (src/webhooks/routes.ts).
const Id = Type.String({ pattern: '^[0-9A-Za-z_-]{1,64}$' });
const DeliveryListQuery = Type.Object({
  status: Type.Optional(
    Type.Union([Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('failed')]),
  ),
  eventId: Type.Optional(Id),
  limit: Type.Optional(Type.String({ pattern: '^(100|[1-9][0-9]?)$', description: '1..100, default 20' })),
  before: Type.Optional(Type.String({ pattern: '^[0-9A-Za-z_-]{1,64}$', description: 'delivery id cursor' })),
});
const IdempotencyKey = Type.String({ pattern: '^[\\x21-\\x7e]{1,255}$' });

const Nullable = (schema: TSchema) => Type.Union([schema, Type.Null()]);
const Delivery = Type.Object({
  id: Type.String(),
  eventId: Type.String({ description: 'the bus event id = the webhook body id = Paygate-Event-Id' }),
  eventType: Type.Union(WEBHOOK_EVENT_TYPES.map((t) => Type.Literal(t))),
  url: Type.String(),
  status: Type.Union([Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('failed')]),
  attemptCount: Type.Integer(),
  nextAttemptAt: Nullable(Type.String({ format: 'date-time' })),
  giveUpAt: Type.String({ format: 'date-time' }),
  lastStatusCode: Nullable(Type.Integer()),
  lastError: Nullable(Type.String()),
  redeliveryOf: Nullable(Type.String()),
  createdAt: Type.String({ format: 'date-time' }),
  deliveredAt: Nullable(Type.String({ format: 'date-time' })),
  attempts: Type.Array(
    Type.Object({
      number: Type.Integer(),
      attemptedAt: Type.String({ format: 'date-time' }),
      durationMs: Type.Integer(),
      statusCode: Nullable(Type.Integer()),
      outcome: Type.String(),
      error: Nullable(Type.String()),
      responseExcerpt: Nullable(Type.String()),
    }),
  ),
});
const deliveryIdParam = { name: 'id', in: 'path', required: true, schema: plainSchema(Id) };

const WEBSOCKET_PROTOCOL = `Live checkout-session updates for the widget. Connect with a WebSocket client to
\`wss://<base_url>${WEBSOCKET_PATH}\`; a plain HTTP GET answers 426 upgrade_required. JSON text frames.

Client to server:
- \`{ "type": "subscribe", "sessionId": "<id>" }\`
- \`{ "type": "unsubscribe", "sessionId": "<id>" }\`

Server to client:
- \`{ "type": "subscribed", "sessionId": "<id>" }\` acknowledges a subscribe;
- \`{ "type": "session", "session": <CheckoutSession> }\` the current state right after subscribing (when known),
  then every change; never older than (or identical to) one the socket already got for that session;
- \`{ "type": "error", "code": "<code>", "message": "<text>", "sessionId"?: "<id>" }\` with code
  invalid_message | unknown_type | invalid_session_id | too_many_subscriptions | rate_limited.

Limits: session ids match ${SESSION_ID_PATTERN.source}; 10 subscriptions per socket; more than 60 messages in 10 s
closes the socket (1008); frames over 4096 bytes close it (1009); ping every 30 s; a socket without
subscriptions for 120 s is closed (1000, idle). Polling fallback: GET /api/v1/checkout/sessions/{id} (checkout)
returns the same session object.`;

const SIGNATURE = `Every webhook is a POST of JSON with headers Paygate-Signature: t=<unix seconds>,v1=<hex
HMAC-SHA256(webhook secret, "<t>.<raw body>")>, Paygate-Event-Id, Paygate-Event-Type and Paygate-Delivery-Id.
Verify the HMAC in constant time and reject |now - t| > 300 s. Delivery is at least once and unordered: drop
ids already processed. 2xx = delivered; 408, 429, 5xx, network errors and timeouts (10 s) are retried with
exponential backoff (30 s doubling, at most 6 h, jittered) for 72 h; other statuses fail without retry.`;

/**
 * One `webhooks` entry per event type: the body is { id, event, createdAt, <payload fields>, data } (see
 * buildWebhookBody): the payload's fields at the top level, except those named like the envelope's, and the whole
 * payload again in `data`.
 */
function webhookEntries() {
  return Object.fromEntries(
    WEBHOOK_EVENT_TYPES.map((type) => {
      const payload = plainSchema(SUBJECTS[type].schema as TSchema) as {
        properties?: Record<string, unknown>;
        required?: string[];
      };
      const data = {
        ...payload,
        properties: { event: { const: type }, ...(payload.properties ?? {}) },
        required: ['event', ...(payload.required ?? [])],
      };
      const envelope = ['id', 'event', 'createdAt', 'data'];
      const topLevel = Object.entries(payload.properties ?? {}).filter(([name]) => !envelope.includes(name));
      const topRequired = (payload.required ?? []).filter((name) => !envelope.includes(name));
      return [
        type,
        {
          post: {
            summary: `${type}, to the seller's webhookUrl`,
            description: SIGNATURE,
            parameters: [
              { name: 'Paygate-Signature', in: 'header', required: true, schema: { type: 'string' } },
              { name: 'Paygate-Event-Id', in: 'header', required: true, schema: { type: 'string' } },
              { name: 'Paygate-Event-Type', in: 'header', required: true, schema: { const: type } },
              { name: 'Paygate-Delivery-Id', in: 'header', required: true, schema: { type: 'string' } },
            ],
            requestBody: {
              required: true,
              content: {
                'application/json': {
                  schema: {
                    type: 'object',
                    required: ['id', 'event', 'createdAt', ...topRequired, 'data'],
                    properties: {
                      id: {
                        type: 'string',
                        description: 'bus event id: the same on every retry and redelivery',
                      },
                      event: { const: type },
                      createdAt: {
                        type: 'string',
                        format: 'date-time',
                        description: 'when the event happened',
                      },
                      ...Object.fromEntries(topLevel),
                      data: { ...data, description: 'the whole event payload, event first' },
                    },
                  },
                },
              },
            },
            responses: { '2XX': { description: 'delivered' } },
          },
        },
      ];
    }),
  );
}

/** The OpenAPI 3.1 description of the notifier: the widget WebSocket, the delivery API and the webhooks it sends. */
export function notifierOpenApi() {
  return openApiDocument({
    title: 'Paygate notifier',
    description: `Live session updates for widgets (WebSocket) and signed, retried webhooks for sellers.\n\n${WEBSOCKET_PROTOCOL}`,
    securitySchemes: { secretKey: securitySchemes.apiKey },
    schemas: { CheckoutSession: CheckoutSessionSnapshot, Delivery },
    paths: {
      [WEBSOCKET_PATH]: {
        get: {
          operationId: 'sessionUpdatesWebSocket',
          summary: 'WebSocket: live checkout-session updates (upgrade required)',
          description: WEBSOCKET_PROTOCOL,
          parameters: [{ name: 'Upgrade', in: 'header', required: true, schema: { const: 'websocket' } }],
          responses: {
            '101': { description: 'switching protocols: the socket speaks the protocol above' },
            ...errorResponses({ '426': 'upgrade_required: a plain HTTP request' }),
          },
        },
      },
      '/api/v1/webhooks/deliveries': {
        get: {
          operationId: 'listWebhookDeliveries',
          summary: "The calling seller's webhook deliveries, newest first, with every attempt",
          security: [{ secretKey: [] }],
          parameters: schemaParameters('query', DeliveryListQuery, { allOptional: true }),
          responses: {
            '200': jsonResponse(
              Type.Object({ data: Type.Array(Delivery), nextCursor: Nullable(Type.String()) }),
              'a page of deliveries',
            ),
            ...errorResponses({ '400': 'invalid_request', '401': 'missing or unknown API key' }),
          },
        },
      },
      '/api/v1/webhooks/deliveries/{id}': {
        get: {
          operationId: 'getWebhookDelivery',
          summary: 'One delivery with its attempts and the payload sent',
          security: [{ secretKey: [] }],
          parameters: [deliveryIdParam],
          responses: {
            '200': jsonResponse(
              Type.Intersect([Delivery, Type.Object({ payload: Nullable(Type.Unknown()) })]),
              'the delivery',
            ),
            ...errorResponses({
              '400': 'invalid_request',
              '401': 'missing or unknown API key',
              '404': 'no such delivery',
            }),
          },
        },
      },
      '/api/v1/webhooks/deliveries/{id}/redeliver': {
        post: {
          operationId: 'redeliverWebhook',
          summary: 'Send the same event (same id and body) again as a new delivery with its own retries',
          security: [{ secretKey: [] }],
          parameters: [
            deliveryIdParam,
            {
              name: 'Idempotency-Key',
              in: 'header',
              required: false,
              description:
                'same key: the same answer; same key on another delivery: 409 idempotency_key_reused',
              schema: plainSchema(IdempotencyKey),
            },
          ],
          responses: {
            '202': jsonResponse(Delivery, 'the new delivery, pending'),
            ...errorResponses({
              '400': 'invalid_request',
              '401': 'missing or unknown API key',
              '404': 'no such delivery',
              '409': 'idempotency_key_reused | webhook_url_missing',
            }),
          },
        },
      },
      [OPENAPI_PATH]: {
        get: {
          operationId: 'notifierOpenApi',
          summary: 'This document',
          responses: { '200': { description: 'OpenAPI 3.1 document' } },
        },
      },
    },
    webhooks: webhookEntries(),
  });
}

/** Mounted by service.ts (one line). */
export function notifierOpenApiRoute(app: Express): void {
  serveOpenApi(app, OPENAPI_PATH, notifierOpenApi());
}
