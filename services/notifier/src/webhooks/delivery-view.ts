import { Nullable, StringEnum } from '@paygate/contracts';
import { type Static, Type } from '@sinclair/typebox';
import { DELIVERY_STATUSES, type NotifierDb } from '../db';
import { type CircuitRow, CircuitSchema, circuitOf, circuitView, iso, targetOf } from './circuits';
import { TEST_EVENT_TYPE } from './endpoint-store';
import { WEBHOOK_EVENT_TYPES } from './payload';
import type { AttemptRow, DeliveryRow } from './repository';

export const Delivery = Type.Object({
  id: Type.String(),
  eventId: Type.String({ description: 'the bus event id = the webhook body id = Paygate-Event-Id' }),
  eventType: Type.Union([...WEBHOOK_EVENT_TYPES.map((t) => Type.Literal(t)), Type.Literal(TEST_EVENT_TYPE)]),
  url: Type.String(),
  endpointId: Nullable(
    Type.String({ description: "the endpoint it went to; null: the account's webhook URL" }),
  ),
  status: StringEnum(DELIVERY_STATUSES),
  attemptCount: Type.Integer(),
  nextAttemptAt: Nullable(Type.String({ format: 'date-time' })),
  giveUpAt: Type.String({ format: 'date-time' }),
  lastStatusCode: Nullable(Type.Integer()),
  lastError: Nullable(Type.String()),
  redeliveryOf: Nullable(Type.String()),
  createdAt: Type.String({ format: 'date-time' }),
  deliveredAt: Nullable(Type.String({ format: 'date-time' })),
  circuit: CircuitSchema,
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

type DeliveryView = Omit<Static<typeof Delivery>, 'eventType'> & { eventType: string };

export function toDeliveryView(
  row: DeliveryRow,
  eventType: string,
  attempts: AttemptRow[],
  circuit: CircuitRow | undefined,
): DeliveryView {
  return {
    id: row.delivery_id,
    eventId: row.event_id,
    eventType,
    url: row.url,
    endpointId: row.endpoint_id,
    status: row.status,
    attemptCount: row.attempt_count,
    nextAttemptAt: iso(row.next_attempt_at),
    giveUpAt: iso(row.give_up_at) as string,
    lastStatusCode: row.last_status_code,
    lastError: row.last_error,
    redeliveryOf: row.redelivery_of,
    createdAt: iso(row.created_at) as string,
    deliveredAt: iso(row.delivered_at),
    circuit: circuitView(circuit),
    attempts: attempts.map((a) => ({
      number: a.attempt_number,
      attemptedAt: iso(a.attempted_at) as string,
      durationMs: a.duration_ms,
      statusCode: a.status_code,
      outcome: a.outcome,
      error: a.error,
      responseExcerpt: a.response_excerpt,
    })),
  };
}

/** One delivery as the seller sees it, its target's circuit read for it. */
export async function deliveryView(
  db: NotifierDb,
  row: DeliveryRow,
  eventType: string,
  attempts: AttemptRow[] = [],
): Promise<DeliveryView> {
  const circuit = await circuitOf(db, row.seller_id, targetOf(row.endpoint_id));
  return toDeliveryView(row, eventType, attempts, circuit);
}
