import type { EventEnvelope, Subject } from '@paygate/contracts';
import type { PaygateWebhookEvent, WebhookBody } from '@paygate/gateway-middleware';

/** The bus events that become webhooks, for every seller with a webhook URL. */
export const WEBHOOK_EVENT_TYPES = [
  'payment.confirmed',
  'payment.reversed',
  'refund.requested',
  'refund.completed',
  'settlement.completed',
  'checkout.session_created',
  'checkout.session_paid',
  'checkout.session_underpaid',
  'checkout.session_expired',
  'checkout.session_reopened',
  // Every kind sent is one the sellers' library types (PaygateWebhookEvent).
] as const satisfies readonly (Subject & PaygateWebhookEvent['event'])[];
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** Top-level names that belong to the webhook itself; a payload field of the same name is read from `data`. */
const ENVELOPE_FIELDS = new Set(['id', 'event', 'createdAt', 'data']);

/**
 * Builds the webhook body of a bus event (shape: WebhookBody in the sellers' library): `id`, `event`, `createdAt`,
 * the payload's fields at the top level (SPEC's `event, transactionId, refundTxHash, amount` and `event,
 * transactionId, reason` are the body's own fields), then `data`, the whole payload with `event` first. A payload
 * field named like an envelope field (a session's `createdAt`) is only in `data`. The serialised string is stored
 * once and sent byte for byte.
 */
export function buildWebhookBody(envelope: EventEnvelope<WebhookEventType, object>): string {
  const payload = envelope.data as Record<string, unknown>;
  const topLevel = Object.fromEntries(Object.entries(payload).filter(([name]) => !ENVELOPE_FIELDS.has(name)));
  const body: WebhookBody<WebhookEventType, Record<string, unknown>> = {
    id: envelope.id,
    event: envelope.type,
    createdAt: envelope.occurredAt,
    ...topLevel,
    // `event` first (an `event` already in the payload keeps that position with the same value).
    data: { event: envelope.type, ...payload },
  };
  return JSON.stringify(body);
}
