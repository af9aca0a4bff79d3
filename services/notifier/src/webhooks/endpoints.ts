import { newEventId } from '@paygate/contracts';
import { type AnyRoute, badRequest, conflict, defineRoute, HttpError, notFound } from '@paygate/http';
import { publicUrlProblem } from '@paygate/net';
import type { ServiceContext } from '@paygate/runtime';
import type { SellerAuth } from '@paygate/seller-auth';
import { Type } from '@sinclair/typebox';
import type { Request } from 'express';
import type { Kysely, Selectable, Transaction } from 'kysely';
import type { NotifierConfig } from '../config';
import type { NotifierDatabase, WebhookEndpointsTable } from '../db';
import { findSeller } from '../sellers/repository';
import { SecretUnavailableError, type WebhookSecrets } from '../sellers/secrets';
import type { WebhookDispatcher } from './dispatcher';
import { endpointSecret } from './endpoint-secret';
import { WEBHOOK_EVENT_TYPES } from './payload';
import { createDelivery, type DeliveryRow } from './repository';

type Db = Kysely<NotifierDatabase> | Transaction<NotifierDatabase>;
type EndpointRow = Selectable<WebhookEndpointsTable>;

/** A seller's endpoints are few (Stripe allows 16): each event is one delivery per endpoint. */
export const MAX_ENDPOINTS_PER_SELLER = 16;
/** The kind of the test event "send test event" posts (never a bus event). */
export const TEST_EVENT_TYPE = 'webhook.test';
/** An endpoint's `events`: these kinds, or "*" for every kind (also the ones added later). */
const ALL_EVENTS = '*';

const EventName = Type.Union([...WEBHOOK_EVENT_TYPES.map((t) => Type.Literal(t)), Type.Literal(ALL_EVENTS)]);
const Events = Type.Array(EventName, {
  minItems: 1,
  maxItems: 32,
  uniqueItems: true,
  description: `the event kinds sent to it, or ["${ALL_EVENTS}"] for all`,
});
const Url = Type.String({
  minLength: 1,
  maxLength: 2048,
  description: 'absolute http(s) URL; https in production',
});
const Description = Type.String({ maxLength: 200 });
const EndpointParams = Type.Object({ id: Type.String({ pattern: '^whe_[0-9A-Z]{26}$' }) });

export const Endpoint = Type.Object({
  id: Type.String(),
  url: Type.String(),
  description: Type.String(),
  events: Type.Array(Type.String()),
  enabled: Type.Boolean(),
  secretVersion: Type.Integer({ description: 'the version of its signing secret (a rotation adds one)' }),
  createdAt: Type.String({ format: 'date-time' }),
  updatedAt: Type.String({ format: 'date-time' }),
});
const WithSecret = Type.Object({
  endpoint: Endpoint,
  secret: Type.String({
    description: 'whsec_… — its signing secret, shown once (verify like the account secret)',
  }),
});

export function toEndpoint(row: EndpointRow) {
  return {
    id: row.endpoint_id,
    url: row.url,
    description: row.description,
    events: row.events,
    enabled: row.enabled,
    secretVersion: row.secret_version,
    createdAt: new Date(row.created_at).toISOString(),
    updatedAt: new Date(row.updated_at).toISOString(),
  };
}

/** The enabled endpoints of a seller that want this kind of event. */
export async function endpointsFor(db: Db, sellerId: string, eventType: string): Promise<EndpointRow[]> {
  const rows = await db
    .selectFrom('webhook_endpoints')
    .selectAll()
    .where('seller_id', '=', sellerId)
    .where('deleted_at', 'is', null)
    .where('enabled', '=', true)
    .execute();
  return rows.filter((row) => row.events.includes(ALL_EVENTS) || row.events.includes(eventType));
}

async function findEndpoint(db: Db, sellerId: string, endpointId: string): Promise<EndpointRow> {
  const row = await db
    .selectFrom('webhook_endpoints')
    .selectAll()
    .where('endpoint_id', '=', endpointId)
    .where('seller_id', '=', sellerId)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
  if (!row) throw notFound('webhook endpoint');
  return row;
}

/** Like the account's webhook URL: absolute http(s), no credentials, query or fragment; public https in production. */
async function checkEndpointUrl(value: string, production: boolean): Promise<string> {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw badRequest('url', 'must be an absolute URL such as https://api.example.com/paygate/webhooks');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw badRequest('url', 'must use http or https');
  if (url.username || url.password) throw badRequest('url', 'must not contain credentials');
  if (url.search || url.hash || value.includes('?') || value.includes('#'))
    throw badRequest('url', 'must not contain a query or fragment');
  if (production) {
    const problem = await publicUrlProblem(url);
    if (problem) throw badRequest('url', problem);
  }
  return url.toString();
}

function sellerOf(req: Request): string {
  if (!req.seller) throw new HttpError(401, 'unauthorized', 'seller authentication is required');
  return req.seller.sellerId;
}

/**
 * Webhook endpoints: list, create (its secret shown once), change (URL, events, on/off), delete, rotate its
 * secret, and send it a test event. The account's single webhook URL (registry) keeps working beside them.
 */
export function endpointRoutes(
  ctx: ServiceContext<NotifierDatabase>,
  deps: {
    auth: SellerAuth;
    dispatcher: WebhookDispatcher;
    secrets: WebhookSecrets;
    config: NotifierConfig;
    /** The delivery as the deliveries routes show it. */
    delivery: (row: DeliveryRow, eventType: string) => unknown;
  },
): AnyRoute[] {
  const { db } = ctx;
  const { config } = deps;
  const auth = { scheme: 'secretKey', middleware: deps.auth.middleware() };
  // The account's secret, from which the endpoint's is derived: none yet is the seller's to fix (409).
  const secretOf = async (sellerId: string, endpointId: string, version: number) => {
    const seller = await findSeller(db, sellerId);
    try {
      const account = await deps.secrets.get(sellerId, seller?.webhook_secret_version ?? 0);
      return endpointSecret(account.secret, endpointId, version);
    } catch (error) {
      if (error instanceof SecretUnavailableError && /has no webhook secret/.test(error.message))
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
  };
  const now = () => config.now();
  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/webhooks/endpoints',
      operationId: 'listWebhookEndpoints',
      summary: "The calling seller's webhook endpoints (the account's webhookUrl is not one of them)",
      auth,
      responses: { '200': Type.Object({ data: Type.Array(Endpoint) }) },
      handler: async (req, res) => {
        const rows = await db
          .selectFrom('webhook_endpoints')
          .selectAll()
          .where('seller_id', '=', sellerOf(req))
          .where('deleted_at', 'is', null)
          .orderBy('created_at')
          .execute();
        res.json({ data: rows.map(toEndpoint) });
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/webhooks/endpoints',
      operationId: 'createWebhookEndpoint',
      summary: 'Add an endpoint with the events it wants; its signing secret is answered once',
      auth,
      body: Type.Object(
        {
          url: Url,
          events: Events,
          description: Type.Optional(Description),
          enabled: Type.Optional(Type.Boolean()),
        },
        { additionalProperties: false },
      ),
      responses: { '201': WithSecret },
      errors: {
        '409': `webhook_secret_missing | too_many_endpoints (${MAX_ENDPOINTS_PER_SELLER} per seller)`,
        '503': 'secret_unavailable',
      },
      handler: async (req, res) => {
        const sellerId = sellerOf(req);
        const url = await checkEndpointUrl(req.body.url, config.production);
        const endpointId = `whe_${newEventId()}`;
        const secret = await secretOf(sellerId, endpointId, 1);
        const row = await ctx.inTransaction(async (trx) => {
          const { count } = await trx
            .selectFrom('webhook_endpoints')
            .select((eb) => eb.fn.countAll<string>().as('count'))
            .where('seller_id', '=', sellerId)
            .where('deleted_at', 'is', null)
            .executeTakeFirstOrThrow();
          if (Number(count) >= MAX_ENDPOINTS_PER_SELLER)
            throw conflict(
              'too_many_endpoints',
              `at most ${MAX_ENDPOINTS_PER_SELLER} endpoints: delete one first`,
            );
          return trx
            .insertInto('webhook_endpoints')
            .values({
              endpoint_id: endpointId,
              seller_id: sellerId,
              url,
              description: req.body.description?.trim() ?? '',
              events: req.body.events,
              enabled: req.body.enabled ?? true,
              created_at: now(),
              updated_at: now(),
              deleted_at: null,
            })
            .returningAll()
            .executeTakeFirstOrThrow();
        });
        res.status(201).json({ endpoint: toEndpoint(row), secret });
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/webhooks/endpoints/:id',
      operationId: 'getWebhookEndpoint',
      summary: 'One webhook endpoint',
      auth,
      params: EndpointParams,
      responses: { '200': Endpoint },
      errors: { '404': 'no such endpoint' },
      handler: async (req, res) => {
        res.json(toEndpoint(await findEndpoint(db, sellerOf(req), req.params.id)));
      },
    }),
    defineRoute({
      method: 'patch',
      path: '/api/v1/webhooks/endpoints/:id',
      operationId: 'updateWebhookEndpoint',
      summary: 'Change an endpoint: URL, events, description, or turn it off and on',
      auth,
      params: EndpointParams,
      body: Type.Object(
        {
          url: Type.Optional(Url),
          events: Type.Optional(Events),
          description: Type.Optional(Description),
          enabled: Type.Optional(Type.Boolean()),
        },
        { additionalProperties: false },
      ),
      responses: { '200': Endpoint },
      errors: { '404': 'no such endpoint' },
      handler: async (req, res) => {
        const sellerId = sellerOf(req);
        await findEndpoint(db, sellerId, req.params.id);
        const url =
          req.body.url === undefined ? undefined : await checkEndpointUrl(req.body.url, config.production);
        const row = await db
          .updateTable('webhook_endpoints')
          .set({
            ...(url !== undefined ? { url } : {}),
            ...(req.body.events !== undefined ? { events: req.body.events } : {}),
            ...(req.body.description !== undefined ? { description: req.body.description.trim() } : {}),
            ...(req.body.enabled !== undefined ? { enabled: req.body.enabled } : {}),
            updated_at: now(),
          })
          .where('endpoint_id', '=', req.params.id)
          .where('seller_id', '=', sellerId)
          .returningAll()
          .executeTakeFirstOrThrow();
        res.json(toEndpoint(row));
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/v1/webhooks/endpoints/:id',
      operationId: 'deleteWebhookEndpoint',
      summary: 'Delete an endpoint: nothing more is sent to it (its pending deliveries fail); its log stays',
      auth,
      params: EndpointParams,
      responses: { '204': { description: 'deleted' } },
      errors: { '404': 'no such endpoint' },
      handler: async (req, res) => {
        const sellerId = sellerOf(req);
        await findEndpoint(db, sellerId, req.params.id);
        await ctx.inTransaction(async (trx) => {
          await trx
            .updateTable('webhook_endpoints')
            .set({ deleted_at: now(), enabled: false, updated_at: now() })
            .where('endpoint_id', '=', req.params.id)
            .execute();
          await trx
            .updateTable('webhook_deliveries')
            .set({ status: 'failed', next_attempt_at: null, last_error: 'endpoint deleted' })
            .where('endpoint_id', '=', req.params.id)
            .where('status', '=', 'pending')
            .execute();
        });
        res.status(204).end();
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/webhooks/endpoints/:id/rotate-secret',
      operationId: 'rotateWebhookEndpointSecret',
      summary: "Replace an endpoint's signing secret (shown once); the other endpoints keep theirs",
      auth,
      params: EndpointParams,
      responses: { '200': WithSecret },
      errors: { '404': 'no such endpoint', '409': 'webhook_secret_missing', '503': 'secret_unavailable' },
      handler: async (req, res) => {
        const sellerId = sellerOf(req);
        const current = await findEndpoint(db, sellerId, req.params.id);
        // Derived first: a registry that cannot answer leaves the endpoint as it was.
        const secret = await secretOf(sellerId, current.endpoint_id, current.secret_version + 1);
        const row = await db
          .updateTable('webhook_endpoints')
          .set((eb) => ({ secret_version: eb('secret_version', '+', 1), updated_at: now() }))
          .where('endpoint_id', '=', current.endpoint_id)
          .where('secret_version', '=', current.secret_version)
          .returningAll()
          .executeTakeFirst();
        if (!row) throw conflict('concurrent_rotation', 'the secret was rotated meanwhile: rotate again');
        res.json({ endpoint: toEndpoint(row), secret });
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/webhooks/endpoints/:id/test',
      operationId: 'sendWebhookTestEvent',
      summary: `Send the endpoint a signed test event (${TEST_EVENT_TYPE}), logged and retried like any delivery`,
      auth,
      params: EndpointParams,
      responses: {
        '202': { description: 'the test delivery, pending (see its attempts in the deliveries)' },
      },
      errors: { '404': 'no such endpoint' },
      handler: async (req, res) => {
        const sellerId = sellerOf(req);
        const endpoint = await findEndpoint(db, sellerId, req.params.id);
        const at = now();
        const eventId = newEventId();
        const data = {
          event: TEST_EVENT_TYPE,
          endpointId: endpoint.endpoint_id,
          sellerId,
          message: 'A test event from Paygate: answer 2xx to mark it delivered.',
        };
        // The shape of every webhook: id, event, createdAt, the payload's fields, then data (with event first).
        const { event: _kind, ...fields } = data;
        const body = JSON.stringify({
          id: eventId,
          event: TEST_EVENT_TYPE,
          createdAt: at.toISOString(),
          ...fields,
          data,
        });
        const delivery = await ctx.inTransaction(async (trx) => {
          await createDelivery(trx, {
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
          return trx
            .selectFrom('webhook_deliveries')
            .selectAll()
            .where('event_id', '=', eventId)
            .executeTakeFirstOrThrow();
        });
        deps.dispatcher.kick();
        res.status(202).json(deps.delivery(delivery, TEST_EVENT_TYPE));
      },
    }),
  ];
}
