import type { EventEnvelope, Subject } from '@paygate/contracts';

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
] as const satisfies readonly Subject[];
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

export interface WebhookBody {
  /** The bus event id: stable across retries and redeliveries (also in the Paygate-Event-Id header). */
  id: string;
  event: WebhookEventType;
  createdAt: string;
  /** The event's payload with `event` first (SPEC: "the field event holds the event kind name"). */
  data: { event: WebhookEventType } & Record<string, unknown>;
}

/** Builds the webhook body of a bus event. The serialised string is stored once and sent byte for byte. */
export function buildWebhookBody(envelope: EventEnvelope<WebhookEventType, object>): string {
  // `event` comes first (an `event` already in the payload keeps that position with the same value).
  const body: WebhookBody = {
    id: envelope.id,
    event: envelope.type,
    createdAt: envelope.occurredAt,
    data: { event: envelope.type, ...(envelope.data as Record<string, unknown>) },
  };
  return JSON.stringify(body);
}
