import { newEventId } from '@paygate/contracts';
import { currentTraceCarrier } from '@paygate/telemetry';
import type { Kysely, Selectable, Transaction } from 'kysely';
import type {
  AttemptOutcome,
  NotifierDatabase,
  NotifierDb,
  WebhookAttemptsTable,
  WebhookDeliveriesTable,
} from '../db';
import { type BreakerPolicy, type CircuitTransition, recordCircuitOutcome, targetOf } from './circuits';
import type { ClaimedDelivery } from './claim';

export type DeliveryRow = Selectable<WebhookDeliveriesTable>;
export type AttemptRow = Selectable<WebhookAttemptsTable>;

const HOUR_MS = 60 * 60 * 1000;

type NewDelivery = {
  eventId: string;
  sellerId: string;
  url: string;
  now: Date;
  retryWindowHours: number;
  endpointId?: string | null;
};

/** A new delivery row, due now, given up `retryWindowHours` later. */
function pendingDelivery(at: NewDelivery & { redeliveryOf: string | null }) {
  return {
    delivery_id: newEventId(),
    event_id: at.eventId,
    seller_id: at.sellerId,
    url: at.url,
    status: 'pending' as const,
    next_attempt_at: at.now,
    give_up_at: new Date(at.now.getTime() + at.retryWindowHours * HOUR_MS),
    redelivery_of: at.redeliveryOf,
    created_at: at.now,
    endpoint_id: at.endpointId ?? null,
  };
}

/** Records the event's body once and its automatic delivery to the seller; a repeat is a no-op (undefined). */
export async function createDelivery(
  trx: Transaction<NotifierDatabase>,
  input: NewDelivery & { eventType: string; body: string },
): Promise<DeliveryRow | undefined> {
  await trx
    .insertInto('webhook_events')
    .values({
      event_id: input.eventId,
      seller_id: input.sellerId,
      event_type: input.eventType,
      body: input.body,
      created_at: input.now,
      // The consumer's span (under the event's producer): the deliveries, sent later, continue this trace.
      traceparent: currentTraceCarrier().traceparent ?? null,
    })
    .onConflict((oc) => oc.column('event_id').doNothing())
    .execute();
  return trx
    .insertInto('webhook_deliveries')
    .values(pendingDelivery({ ...input, redeliveryOf: null }))
    .onConflict((oc) =>
      input.endpointId
        ? oc
            .columns(['event_id', 'endpoint_id'])
            .where('redelivery_of', 'is', null)
            .where('endpoint_id', 'is not', null)
            .doNothing()
        : oc
            .columns(['event_id', 'seller_id'])
            .where('redelivery_of', 'is', null)
            .where('endpoint_id', 'is', null)
            .doNothing(),
    )
    .returningAll()
    .executeTakeFirst();
}

export interface AttemptResult {
  outcome: AttemptOutcome;
  statusCode: number | null;
  error: string | null;
  responseExcerpt: string | null;
  durationMs: number;
}

/** When a delivery is tried next: none past give_up_at, else `retryAt` but no later than give_up_at. */
function retryTime(delivery: ClaimedDelivery, now: Date, retryAt: Date | null): Date | null {
  if (retryAt === null || now.getTime() >= delivery.giveUpAt.getTime()) return null;
  // The last retry happens at the end of the window rather than never.
  return new Date(Math.min(retryAt.getTime(), delivery.giveUpAt.getTime()));
}

/** Logs one attempt and moves the delivery on; failed past give_up_at or without `retryAt` (all spent). */
export async function recordAttempt(
  db: Kysely<NotifierDatabase>,
  delivery: ClaimedDelivery,
  result: AttemptResult,
  options: { attemptedAt: Date; retryAt: Date | null; breaker: BreakerPolicy },
): Promise<{ status: DeliveryRow['status']; circuit: CircuitTransition }> {
  return db.transaction().execute(async (trx) => {
    const current = await trx
      .selectFrom('webhook_deliveries')
      .select(['attempt_count', 'status'])
      .where('delivery_id', '=', delivery.deliveryId)
      .forUpdate()
      .executeTakeFirstOrThrow();
    const attemptNumber = current.attempt_count + 1;
    await trx
      .insertInto('webhook_attempts')
      .values({
        delivery_id: delivery.deliveryId,
        attempt_number: attemptNumber,
        attempted_at: options.attemptedAt,
        duration_ms: Math.max(0, Math.round(result.durationMs)),
        status_code: result.statusCode,
        outcome: result.outcome,
        error: result.error,
        response_excerpt: result.responseExcerpt,
      })
      .execute();
    const nextAttemptAt =
      result.outcome === 'retryable' ? retryTime(delivery, options.attemptedAt, options.retryAt) : null;
    const status = result.outcome === 'delivered' ? 'delivered' : nextAttemptAt ? 'pending' : 'failed';
    await trx
      .updateTable('webhook_deliveries')
      .set({
        attempt_count: attemptNumber,
        status,
        next_attempt_at: nextAttemptAt,
        last_status_code: result.statusCode,
        last_error: result.error,
        delivered_at: status === 'delivered' ? options.attemptedAt : null,
        leased_until: null,
      })
      .where('delivery_id', '=', delivery.deliveryId)
      .execute();
    // The target's breaker, in the same transaction: an attempt is never recorded without its effect on it.
    const circuit = await recordCircuitOutcome(
      trx,
      {
        sellerId: delivery.sellerId,
        target: targetOf(delivery.endpoint?.id ?? null),
        now: options.attemptedAt,
        failed: result.outcome === 'retryable',
        error: result.error,
      },
      options.breaker,
    );
    return { status, circuit };
  });
}

/** Puts a claimed delivery back without an attempt (nothing was sent: the signing secret was unavailable). */
export async function postponeDelivery(
  db: Kysely<NotifierDatabase>,
  delivery: ClaimedDelivery,
  options: { now: Date; retryAt: Date; reason: string },
): Promise<void> {
  const nextAttemptAt = retryTime(delivery, options.now, options.retryAt);
  await db
    .updateTable('webhook_deliveries')
    .set({
      status: nextAttemptAt ? 'pending' : 'failed',
      next_attempt_at: nextAttemptAt,
      last_error: options.reason,
      leased_until: null,
    })
    .where('delivery_id', '=', delivery.deliveryId)
    .where('status', '=', 'pending')
    .execute();
}

export async function findDelivery(
  db: NotifierDb,
  sellerId: string,
  deliveryId: string,
): Promise<DeliveryRow | undefined> {
  return db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('delivery_id', '=', deliveryId)
    .where('seller_id', '=', sellerId)
    .executeTakeFirst();
}

/** A page of the seller's deliveries, newest first, each with its event's kind. */
export async function listDeliveries(
  db: NotifierDb,
  sellerId: string,
  filter: { status?: string; eventId?: string; endpointId?: string; before?: string; limit: number },
): Promise<Array<DeliveryRow & { event_type: string }>> {
  let query = db
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhook_events as e', 'e.event_id', 'd.event_id')
    .selectAll('d')
    .select('e.event_type')
    .where('d.seller_id', '=', sellerId)
    .orderBy('d.delivery_id', 'desc')
    .limit(filter.limit);
  if (filter.status) query = query.where('d.status', '=', filter.status as DeliveryRow['status']);
  if (filter.eventId) query = query.where('d.event_id', '=', filter.eventId);
  if (filter.endpointId) query = query.where('d.endpoint_id', '=', filter.endpointId);
  if (filter.before) query = query.where('d.delivery_id', '<', filter.before);
  return query.execute();
}

export async function attemptsOf(db: NotifierDb, deliveryIds: string[]): Promise<Map<string, AttemptRow[]>> {
  const byDelivery = new Map<string, AttemptRow[]>();
  if (deliveryIds.length === 0) return byDelivery;
  const rows = await db
    .selectFrom('webhook_attempts')
    .selectAll()
    .where('delivery_id', 'in', deliveryIds)
    .orderBy('delivery_id')
    .orderBy('attempt_number')
    .execute();
  for (const row of rows) {
    const list = byDelivery.get(row.delivery_id) ?? [];
    list.push(row);
    byDelivery.set(row.delivery_id, list);
  }
  return byDelivery;
}

export async function eventOf(db: NotifierDb, eventId: string) {
  return db.selectFrom('webhook_events').selectAll().where('event_id', '=', eventId).executeTakeFirst();
}

/** A new delivery of an already delivered (or failed) event, on the seller's request, to the current URL. */
export async function createRedelivery(
  trx: Transaction<NotifierDatabase>,
  original: DeliveryRow,
  options: { url: string; now: Date; retryWindowHours: number },
): Promise<DeliveryRow> {
  return trx
    .insertInto('webhook_deliveries')
    .values(
      pendingDelivery({
        ...options,
        eventId: original.event_id,
        sellerId: original.seller_id,
        endpointId: original.endpoint_id,
        redeliveryOf: original.delivery_id,
      }),
    )
    .returningAll()
    .executeTakeFirstOrThrow();
}
