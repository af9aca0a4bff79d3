import { newEventId } from '@paygate/contracts';
import { conflict, HttpError, notFound } from '@paygate/http';
import type { ServiceContext } from '@paygate/runtime';
import type { Selectable } from 'kysely';
import type { NotifierDatabase, NotifierDb, WebhookEndpointsTable } from '../db';
import { NoWebhookSecretError } from '../errors';
import { findSeller } from '../sellers/repository';
import type { WebhookSecrets } from '../sellers/secrets';
import { endpointSecret } from './endpoint-secret';
import { buildWebhookBody } from './payload';
import { createDelivery, type DeliveryRow } from './repository';

export type EndpointRow = Selectable<WebhookEndpointsTable>;

/** A seller's endpoints are few (Stripe allows 16): each event is one delivery per endpoint. */
export const MAX_ENDPOINTS_PER_SELLER = 16;
/** The kind of the test event "send test event" posts (never a bus event). */
export const TEST_EVENT_TYPE = 'webhook.test';
/** An endpoint's `events`: these kinds, or "*" for every kind (also the ones added later). */
export const ALL_EVENTS = '*';

/** An endpoint's fields, its URL already checked. */
type NewEndpoint = { url: string; events: string[]; description?: string; enabled?: boolean };

/** A seller's endpoints that are not deleted. */
export const liveEndpoints = (db: NotifierDb, sellerId: string) =>
  db
    .selectFrom('webhook_endpoints')
    .selectAll()
    .where('seller_id', '=', sellerId)
    .where('deleted_at', 'is', null);

/** The enabled endpoints of a seller that want this kind of event. */
export async function endpointsFor(
  db: NotifierDb,
  sellerId: string,
  eventType: string,
): Promise<EndpointRow[]> {
  const rows = await liveEndpoints(db, sellerId).where('enabled', '=', true).execute();
  return rows.filter((row) => row.events.includes(ALL_EVENTS) || row.events.includes(eventType));
}

export function listEndpoints(db: NotifierDb, sellerId: string): Promise<EndpointRow[]> {
  return liveEndpoints(db, sellerId).orderBy('created_at').execute();
}

/** The seller's endpoint, not deleted, or 404. */
export async function findEndpoint(
  db: NotifierDb,
  sellerId: string,
  endpointId: string,
): Promise<EndpointRow> {
  const row = await liveEndpoints(db, sellerId).where('endpoint_id', '=', endpointId).executeTakeFirst();
  if (!row) throw notFound('webhook endpoint');
  return row;
}

/** The account's secret, from which the endpoint's is derived: none yet is the seller's to fix (409). */
export async function derivedEndpointSecret(
  db: NotifierDb,
  secrets: WebhookSecrets,
  at: { sellerId: string; endpointId: string; version: number },
): Promise<string> {
  const seller = await findSeller(db, at.sellerId);
  try {
    const account = await secrets.get(at.sellerId, seller?.webhook_secret_version ?? 0);
    return endpointSecret(account.secret, at.endpointId, at.version);
  } catch (error) {
    if (error instanceof NoWebhookSecretError)
      throw conflict(
        'webhook_secret_missing',
        "the account has no webhook signing secret yet: create it first (POST /api/v1/account/webhook-secret/rotate, wallet session); each endpoint's secret is derived from it",
      );
    throw new HttpError(
      503,
      'secret_unavailable',
      'cannot reach the signing secrets right now; retry shortly',
    );
  }
}

/** Adds the endpoint unless the seller has its {@link MAX_ENDPOINTS_PER_SELLER} already (409). */
export function insertEndpoint(
  ctx: ServiceContext<NotifierDatabase>,
  at: { sellerId: string; endpointId: string; now: () => Date },
  endpoint: NewEndpoint,
): Promise<EndpointRow> {
  return ctx.inTransaction(async (trx) => {
    const { count } = await liveEndpoints(trx, at.sellerId)
      .clearSelect()
      .select((eb) => eb.fn.countAll<string>().as('count'))
      .executeTakeFirstOrThrow();
    if (Number(count) >= MAX_ENDPOINTS_PER_SELLER)
      throw conflict('too_many_endpoints', `at most ${MAX_ENDPOINTS_PER_SELLER} endpoints: delete one first`);
    return trx
      .insertInto('webhook_endpoints')
      .values({
        endpoint_id: at.endpointId,
        seller_id: at.sellerId,
        url: endpoint.url,
        description: endpoint.description?.trim() ?? '',
        events: endpoint.events,
        enabled: endpoint.enabled ?? true,
        created_at: at.now(),
        updated_at: at.now(),
      })
      .returningAll()
      .executeTakeFirstOrThrow();
  });
}

/** Applies the fields given to the seller's endpoint; those left out (undefined: kysely skips them) stay. */
export function updateEndpoint(
  db: NotifierDb,
  at: { sellerId: string; endpointId: string; now: Date },
  change: Partial<NewEndpoint>,
): Promise<EndpointRow> {
  return db
    .updateTable('webhook_endpoints')
    .set({
      url: change.url,
      events: change.events,
      description: change.description?.trim(),
      enabled: change.enabled,
      updated_at: at.now,
    })
    .where('endpoint_id', '=', at.endpointId)
    .where('seller_id', '=', at.sellerId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** Marks the endpoint deleted (and off) and fails its pending deliveries; its log stays. */
export async function deleteEndpoint(
  ctx: ServiceContext<NotifierDatabase>,
  endpointId: string,
  now: () => Date,
): Promise<void> {
  await ctx.inTransaction(async (trx) => {
    await trx
      .updateTable('webhook_endpoints')
      .set({ deleted_at: now(), enabled: false, updated_at: now() })
      .where('endpoint_id', '=', endpointId)
      .execute();
    await trx
      .updateTable('webhook_deliveries')
      .set({ status: 'failed', next_attempt_at: null, last_error: 'endpoint deleted' })
      .where('endpoint_id', '=', endpointId)
      .where('status', '=', 'pending')
      .execute();
    // Nothing more goes there: its breaker goes too (an endpoint id is never reused).
    await trx
      .deleteFrom('webhook_circuits')
      .where('seller_id', 'in', (eb) =>
        eb.selectFrom('webhook_endpoints').select('seller_id').where('endpoint_id', '=', endpointId),
      )
      .where('target', '=', endpointId)
      .execute();
  });
}

/** Moves the endpoint's secret one version on, unless another rotation did first (409 concurrent_rotation). */
export async function bumpSecretVersion(
  db: NotifierDb,
  current: EndpointRow,
  now: Date,
): Promise<EndpointRow> {
  const row = await db
    .updateTable('webhook_endpoints')
    .set((eb) => ({ secret_version: eb('secret_version', '+', 1), updated_at: now }))
    .where('endpoint_id', '=', current.endpoint_id)
    .where('secret_version', '=', current.secret_version)
    .returningAll()
    .executeTakeFirst();
  if (!row) throw conflict('concurrent_rotation', 'the secret was rotated meanwhile: rotate again');
  return row;
}

/** Queues a signed test event to the endpoint, logged and retried (for an hour) like any delivery. */
export function createTestDelivery(
  ctx: ServiceContext<NotifierDatabase>,
  sellerId: string,
  endpoint: EndpointRow,
  at: Date,
): Promise<DeliveryRow> {
  const eventId = newEventId();
  const body = buildWebhookBody({
    id: eventId,
    type: TEST_EVENT_TYPE,
    occurredAt: at.toISOString(),
    data: {
      endpointId: endpoint.endpoint_id,
      sellerId,
      message: 'A test event from Paygate: answer 2xx to mark it delivered.',
    },
  });
  return ctx.inTransaction(async (trx) => {
    const created = await createDelivery(trx, {
      eventId,
      eventType: TEST_EVENT_TYPE,
      sellerId,
      url: endpoint.url,
      body,
      now: at,
      // A test is for now: it is not retried for days.
      retryWindowHours: 1,
      endpointId: endpoint.endpoint_id,
    });
    // A new event id: never a repeat.
    return created as DeliveryRow;
  });
}
