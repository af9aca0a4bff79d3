import { type EventEnvelope, SUBJECTS, type Subject } from '@paygate/contracts';
import { WEBHOOK_EVENT_TYPES as WEBHOOK_EVENT_KINDS } from '@paygate/contracts/webhook-events';
import type { PaygateWebhookEvent, WebhookBody } from '@paygate/gateway-middleware';
import { plainSchema } from '@paygate/http';
import type { TSchema } from '@sinclair/typebox';

/** The bus events that become webhooks (@paygate/contracts), each a kind the sellers' library types. */
export const WEBHOOK_EVENT_TYPES = WEBHOOK_EVENT_KINDS satisfies readonly (Subject &
  PaygateWebhookEvent['event'])[];
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** Top-level names that belong to the webhook itself; a payload field of the same name is read from `data`. */
const ENVELOPE_FIELDS = new Set(['id', 'event', 'createdAt', 'data']);

/** The WebhookBody (docs/api.md): envelope fields, the payload's others, then `data`; stored, sent as is. */
export function buildWebhookBody(
  envelope: Pick<EventEnvelope<string, object>, 'id' | 'type' | 'occurredAt' | 'data'>,
): string {
  const payload = envelope.data as Record<string, unknown>;
  const topLevel = Object.fromEntries(Object.entries(payload).filter(([name]) => !ENVELOPE_FIELDS.has(name)));
  const body: WebhookBody<string, Record<string, unknown>> = {
    id: envelope.id,
    event: envelope.type,
    createdAt: envelope.occurredAt,
    ...topLevel,
    // `event` first (an `event` already in the payload keeps that position with the same value).
    data: { event: envelope.type, ...payload },
  };
  return JSON.stringify(body);
}

const SIGNATURE = `Every webhook is a POST of JSON with headers Paygate-Signature: t=<unix seconds>,v1=<hex
HMAC-SHA256(webhook secret, "<t>.<raw body>")>, Paygate-Event-Id, Paygate-Event-Type and Paygate-Delivery-Id.
Verify the HMAC in constant time and reject |now - t| > 300 s. Delivery is at least once and unordered: drop
ids already processed. 2xx = delivered; 408, 429, 5xx, network errors and timeouts (10 s) are retried with
exponential backoff (30 s doubling, at most 6 h, jittered) for 72 h; other statuses fail without retry.`;

/** The OpenAPI `webhooks` entries, one per event type, in buildWebhookBody's shape. */
export function webhookDocuments() {
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
      const topLevel = Object.entries(payload.properties ?? {}).filter(
        ([name]) => !ENVELOPE_FIELDS.has(name),
      );
      const topRequired = (payload.required ?? []).filter((name) => !ENVELOPE_FIELDS.has(name));
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
