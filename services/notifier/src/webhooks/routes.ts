import { Nullable, StringEnum } from '@paygate/contracts';
import {
  type AnyRoute,
  conflict,
  defineRoute,
  fingerprintOf,
  type IdempotencyStore,
  idempotencyKeyOf,
  idempotencyKeyParameter,
  idempotentInTransaction,
  notFound,
  sendIdempotentAnswer,
} from '@paygate/http';
import type { ServiceContext } from '@paygate/runtime';
import { Type } from '@sinclair/typebox';
import { sql, type Transaction } from 'kysely';
import type { NotifierConfig } from '../config';
import { DELIVERY_STATUSES, type NotifierDatabase } from '../db';
import { findSeller } from '../sellers/repository';
import { circuitsOf, targetOf } from './circuits';
import { Delivery, deliveryView, toDeliveryView } from './delivery-view';
import { liveEndpoints } from './endpoint-store';
import { endpointRoutes, type WebhookRouteDeps } from './endpoints';
import {
  attemptsOf,
  createRedelivery,
  type DeliveryRow,
  eventOf,
  findDelivery,
  listDeliveries,
} from './repository';
import { manualDeliveryLimit, secretKeyAuth, sellerOf } from './seller-request';

const Id = Type.String({ pattern: '^[0-9A-Za-z_-]{1,64}$' });
const ListQuery = Type.Object(
  {
    status: Type.Optional(StringEnum(DELIVERY_STATUSES)),
    eventId: Type.Optional(Id),
    endpointId: Type.Optional(Type.String({ pattern: '^whe_[0-9A-Z]{26}$' })),
    limit: Type.Optional(Type.String({ pattern: '^(100|[1-9][0-9]?)$', description: '1..100, default 20' })),
    before: Type.Optional(Type.String({ pattern: Id.pattern, description: 'delivery id cursor' })),
  },
  { additionalProperties: false },
);
const DeliveryParams = Type.Object({ id: Id });

/** The seller's view of its webhook deliveries: list, inspect (with every attempt), ask for a redelivery. */
export function webhookRoutes(ctx: ServiceContext<NotifierDatabase>, deps: WebhookRouteDeps): AnyRoute[] {
  return [...endpointRoutes(ctx, deps), ...deliveryLogRoutes(ctx, deps), redeliverRoute(ctx, deps)];
}

function deliveryLogRoutes(ctx: ServiceContext<NotifierDatabase>, deps: WebhookRouteDeps): AnyRoute[] {
  const auth = secretKeyAuth(deps.auth);
  const { db } = ctx;
  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/webhooks/deliveries',
      operationId: 'listWebhookDeliveries',
      summary: "The calling seller's webhook deliveries, newest first, with every attempt",
      auth,
      query: ListQuery,
      responses: {
        '200': Type.Object(
          { data: Type.Array(Delivery), nextCursor: Nullable(Type.String()) },
          { description: 'a page of deliveries' },
        ),
      },
      handler: async (req, res) => {
        const limit = Number(req.query.limit ?? '20');
        const sellerId = sellerOf(req);
        const rows = await listDeliveries(db, sellerId, { ...req.query, limit });
        const ids = rows.map((row) => row.delivery_id);
        const attempts = await attemptsOf(db, ids);
        const targets = rows.map((row) => targetOf(row.endpoint_id));
        const circuits = await circuitsOf(db, sellerId, targets);
        res.json({
          data: rows.map((row) => {
            const circuit = circuits.get(targetOf(row.endpoint_id));
            return toDeliveryView(row, row.event_type, attempts.get(row.delivery_id) ?? [], circuit);
          }),
          nextCursor: rows.length === limit ? (rows[rows.length - 1]?.delivery_id ?? null) : null,
        });
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/webhooks/deliveries/:id',
      operationId: 'getWebhookDelivery',
      summary: 'One delivery with its attempts and the payload sent',
      auth,
      params: DeliveryParams,
      responses: {
        '200': Type.Intersect([Delivery, Type.Object({ payload: Nullable(Type.Unknown()) })], {
          description: 'the delivery',
        }),
      },
      errors: { '404': 'no such delivery' },
      handler: async (req, res) => {
        const row = await findDelivery(db, sellerOf(req), req.params.id);
        if (!row) throw notFound('delivery');
        const event = await eventOf(db, row.event_id);
        const attempts = await attemptsOf(db, [row.delivery_id]);
        res.json({
          ...(await deliveryView(db, row, event?.event_type ?? '', attempts.get(row.delivery_id))),
          payload: event ? JSON.parse(event.body) : null,
        });
      },
    }),
  ];
}

function redeliverRoute(ctx: ServiceContext<NotifierDatabase>, deps: WebhookRouteDeps): AnyRoute {
  const { config, dispatcher } = deps;
  const limited = manualDeliveryLimit(deps.manualDeliveries);
  return defineRoute({
    method: 'post',
    path: '/api/v1/webhooks/deliveries/:id/redeliver',
    operationId: 'redeliverWebhook',
    summary: 'Send the same event (same id and body) again as a new delivery with its own retries',
    auth: secretKeyAuth(deps.auth),
    params: DeliveryParams,
    headers: [
      idempotencyKeyParameter(
        'same key: the same answer; same key on another delivery: 409 idempotency_key_reused',
      ),
    ],
    responses: { '202': { description: 'the new delivery, pending', schema: Delivery } },
    errors: {
      '404': 'no such delivery',
      '409': 'idempotency_key_reused | webhook_url_missing',
      ...limited.errors,
    },
    before: limited.before,
    handler: async (req, res) => {
      const sellerId = sellerOf(req);
      const key = idempotencyKeyOf(req);
      const request =
        key === undefined ? undefined : { scope: sellerId, key, fingerprint: fingerprintOf(req) };
      const answer = await ctx.inTransaction((trx) =>
        idempotentInTransaction(redeliveryKeys(trx), request, async () => ({
          status: 202,
          body: await redeliver(trx, config, sellerId, req.params.id),
        })),
      );
      dispatcher.kick();
      sendIdempotentAnswer(res, answer);
    },
  });
}

/** A new delivery of the seller's delivery `id` (404 if none), sent again where it went. */
async function redeliver(
  trx: Transaction<NotifierDatabase>,
  config: NotifierConfig,
  sellerId: string,
  id: string,
): ReturnType<typeof deliveryView> {
  const original = await findDelivery(trx, sellerId, id);
  if (!original) throw notFound('delivery');
  const url = await redeliveryUrl(trx, sellerId, original);
  const created = await createRedelivery(trx, original, {
    url,
    now: config.now(),
    retryWindowHours: config.webhookRetryWindowHours,
  });
  const event = await eventOf(trx, created.event_id);
  return deliveryView(trx, created, event?.event_type ?? '');
}

/** Where a delivery is sent again: the endpoint's current URL, or the account's webhook URL (409 if gone). */
async function redeliveryUrl(
  trx: Transaction<NotifierDatabase>,
  sellerId: string,
  original: DeliveryRow,
): Promise<string> {
  if (original.endpoint_id) {
    const endpoint = await liveEndpoints(trx, sellerId)
      .where('endpoint_id', '=', original.endpoint_id)
      .executeTakeFirst();
    if (!endpoint) throw conflict('webhook_endpoint_deleted', 'the endpoint of this delivery was deleted');
    return endpoint.url;
  }
  const url = (await findSeller(trx, sellerId))?.webhook_url;
  if (!url) throw conflict('webhook_url_missing', 'configure a webhook URL before asking for a redelivery');
  return url;
}

/** The notifier's storage of Idempotency-Keys (its idempotency_keys table), in the redelivery's transaction. */
function redeliveryKeys(trx: Transaction<NotifierDatabase>): IdempotencyStore {
  return {
    async lock({ scope, key }) {
      const name = `notifier-redelivery:${scope}:${key}`;
      await sql`select pg_advisory_xact_lock(hashtextextended(${name}, 0))`.execute(trx);
    },
    async find({ scope, key }) {
      const stored = await trx
        .selectFrom('idempotency_keys')
        .selectAll()
        .where('seller_id', '=', scope)
        .where('idempotency_key', '=', key)
        .executeTakeFirst();
      return (
        stored && {
          fingerprint: stored.request_hash,
          answer: { status: stored.response_status, body: stored.response_body },
        }
      );
    },
    async save({ scope, key, fingerprint }, answer) {
      await trx
        .insertInto('idempotency_keys')
        .values({
          seller_id: scope,
          idempotency_key: key,
          request_hash: fingerprint,
          response_status: answer.status,
          response_body: JSON.stringify(answer.body),
        })
        .execute();
    },
  };
}
