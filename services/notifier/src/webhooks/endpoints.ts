import { newEventId } from '@paygate/contracts';
import { type AnyRoute, badRequest, defineRoute, type SharedRateLimiter } from '@paygate/http';
import { publicUrlProblem } from '@paygate/net';
import type { ServiceContext } from '@paygate/runtime';
import { requireWalletSession, type SellerAuth } from '@paygate/seller-auth';
import { Type } from '@sinclair/typebox';
import type { Kysely } from 'kysely';
import type { NotifierConfig } from '../config';
import type { NotifierDatabase } from '../db';
import type { WebhookSecrets } from '../sellers/secrets';
import { type CircuitRow, CircuitSchema, circuitOf, circuitsOf, circuitView } from './circuits';
import { deliveryView } from './delivery-view';
import type { WebhookDispatcher } from './dispatcher';
import {
  ALL_EVENTS,
  bumpSecretVersion,
  createTestDelivery,
  deleteEndpoint,
  derivedEndpointSecret,
  type EndpointRow,
  findEndpoint,
  insertEndpoint,
  listEndpoints,
  MAX_ENDPOINTS_PER_SELLER,
  TEST_EVENT_TYPE,
  updateEndpoint,
} from './endpoint-store';
import { WEBHOOK_EVENT_TYPES } from './payload';
import { manualDeliveryLimit, secretKeyAuth, sellerOf } from './seller-request';

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
const EndpointParams = Type.Object({ id: Type.String({ pattern: '^whe_[0-9A-Z]{26}$' }) });
const EndpointFields = Type.Object(
  {
    url: Url,
    events: Events,
    description: Type.Optional(Type.String({ maxLength: 200 })),
    enabled: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
const WALLET_SESSION_REQUIRED =
  'wallet_session_required: the sk_ API key alone cannot change where events go';
const CHANGE_ERRORS = { '403': WALLET_SESSION_REQUIRED, '404': 'no such endpoint' };

export const Endpoint = Type.Object({
  id: Type.String(),
  url: Type.String(),
  description: Type.String(),
  events: Type.Array(Type.String()),
  enabled: Type.Boolean(),
  secretVersion: Type.Integer({ description: 'the version of its signing secret (a rotation adds one)' }),
  createdAt: Type.String({ format: 'date-time' }),
  updatedAt: Type.String({ format: 'date-time' }),
  circuit: CircuitSchema,
});
const WithSecret = Type.Object({
  endpoint: Endpoint,
  secret: Type.String({
    description: 'whsec_… — its signing secret, shown once (verify like the account secret)',
  }),
});

function toEndpoint(row: EndpointRow, circuit?: CircuitRow) {
  return {
    id: row.endpoint_id,
    url: row.url,
    description: row.description,
    events: row.events,
    enabled: row.enabled,
    secretVersion: row.secret_version,
    createdAt: new Date(row.created_at).toISOString(),
    updatedAt: new Date(row.updated_at).toISOString(),
    circuit: circuitView(circuit),
  };
}

async function withCircuit(db: Kysely<NotifierDatabase>, row: EndpointRow) {
  return toEndpoint(row, await circuitOf(db, row.seller_id, row.endpoint_id));
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

export interface WebhookRouteDeps {
  auth: SellerAuth;
  config: NotifierConfig;
  secrets: WebhookSecrets;
  dispatcher: WebhookDispatcher;
  /** A seller's test events and redeliveries per minute (every replica's, counted in Postgres). */
  manualDeliveries: SharedRateLimiter;
}

/** Webhook endpoints, beside the account's single webhook URL (registry). */
export function endpointRoutes(ctx: ServiceContext<NotifierDatabase>, deps: WebhookRouteDeps): AnyRoute[] {
  return [
    ...endpointListRoutes(ctx, deps),
    ...oneEndpointRoutes(ctx, deps),
    ...endpointActionRoutes(ctx, deps),
  ];
}

function endpointListRoutes(ctx: ServiceContext<NotifierDatabase>, deps: WebhookRouteDeps): AnyRoute[] {
  const auth = secretKeyAuth(deps.auth);
  const { config, secrets } = deps;
  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/webhooks/endpoints',
      operationId: 'listWebhookEndpoints',
      summary: "The calling seller's webhook endpoints (the account's webhookUrl is not one of them)",
      auth,
      responses: { '200': Type.Object({ data: Type.Array(Endpoint) }) },
      handler: async (req, res) => {
        const sellerId = sellerOf(req);
        const rows = await listEndpoints(ctx.db, sellerId);
        const ids = rows.map((row) => row.endpoint_id);
        const circuits = await circuitsOf(ctx.db, sellerId, ids);
        res.json({ data: rows.map((row) => toEndpoint(row, circuits.get(row.endpoint_id))) });
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/webhooks/endpoints',
      operationId: 'createWebhookEndpoint',
      summary: 'Add an endpoint with the events it wants; its signing secret is answered once',
      auth,
      body: EndpointFields,
      responses: { '201': WithSecret },
      errors: {
        '403': WALLET_SESSION_REQUIRED,
        '409': `webhook_secret_missing | too_many_endpoints (${MAX_ENDPOINTS_PER_SELLER} per seller)`,
        '503': 'secret_unavailable',
      },
      handler: async (req, res) => {
        requireWalletSession(req.credential, 'creating a webhook endpoint');
        const sellerId = sellerOf(req);
        const url = await checkEndpointUrl(req.body.url, config.production);
        const endpointId = `whe_${newEventId()}`;
        const secret = await derivedEndpointSecret(ctx.db, secrets, { sellerId, endpointId, version: 1 });
        const row = await insertEndpoint(
          ctx,
          { sellerId, endpointId, now: () => config.now() },
          { ...req.body, url },
        );
        res.status(201).json({ endpoint: toEndpoint(row), secret });
      },
    }),
  ];
}

function oneEndpointRoutes(ctx: ServiceContext<NotifierDatabase>, deps: WebhookRouteDeps): AnyRoute[] {
  const auth = secretKeyAuth(deps.auth);
  const { config } = deps;
  return [
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
        res.json(await withCircuit(ctx.db, await findEndpoint(ctx.db, sellerOf(req), req.params.id)));
      },
    }),
    defineRoute({
      method: 'patch',
      path: '/api/v1/webhooks/endpoints/:id',
      operationId: 'updateWebhookEndpoint',
      summary: 'Change an endpoint: URL, events, description, or turn it off and on',
      auth,
      params: EndpointParams,
      body: Type.Partial(EndpointFields),
      responses: { '200': Endpoint },
      errors: CHANGE_ERRORS,
      handler: async (req, res) => {
        requireWalletSession(req.credential, 'changing a webhook endpoint');
        const sellerId = sellerOf(req);
        const endpointId = req.params.id;
        await findEndpoint(ctx.db, sellerId, endpointId);
        const url =
          req.body.url === undefined ? undefined : await checkEndpointUrl(req.body.url, config.production);
        const row = await updateEndpoint(
          ctx.db,
          { sellerId, endpointId, now: config.now() },
          { ...req.body, url },
        );
        res.json(await withCircuit(ctx.db, row));
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
      errors: CHANGE_ERRORS,
      handler: async (req, res) => {
        requireWalletSession(req.credential, 'deleting a webhook endpoint');
        await findEndpoint(ctx.db, sellerOf(req), req.params.id);
        await deleteEndpoint(ctx, req.params.id, () => config.now());
        res.status(204).end();
      },
    }),
  ];
}

function endpointActionRoutes(ctx: ServiceContext<NotifierDatabase>, deps: WebhookRouteDeps): AnyRoute[] {
  const auth = secretKeyAuth(deps.auth);
  const { config, secrets, dispatcher } = deps;
  const limited = manualDeliveryLimit(deps.manualDeliveries);
  return [
    defineRoute({
      method: 'post',
      path: '/api/v1/webhooks/endpoints/:id/rotate-secret',
      operationId: 'rotateWebhookEndpointSecret',
      summary: "Replace an endpoint's signing secret (shown once); the other endpoints keep theirs",
      auth,
      params: EndpointParams,
      responses: { '200': WithSecret },
      errors: {
        ...CHANGE_ERRORS,
        '409': 'webhook_secret_missing',
        '503': 'secret_unavailable',
      },
      handler: async (req, res) => {
        requireWalletSession(req.credential, "rotating a webhook endpoint's secret");
        const sellerId = sellerOf(req);
        const current = await findEndpoint(ctx.db, sellerId, req.params.id);
        // Derived first: a registry that cannot answer leaves the endpoint as it was.
        const secret = await derivedEndpointSecret(ctx.db, secrets, {
          sellerId,
          endpointId: current.endpoint_id,
          version: current.secret_version + 1,
        });
        const row = await bumpSecretVersion(ctx.db, current, config.now());
        res.json({ endpoint: await withCircuit(ctx.db, row), secret });
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
      errors: { '404': 'no such endpoint', ...limited.errors },
      before: limited.before,
      handler: async (req, res) => {
        const sellerId = sellerOf(req);
        const endpoint = await findEndpoint(ctx.db, sellerId, req.params.id);
        const row = await createTestDelivery(ctx, sellerId, endpoint, config.now());
        dispatcher.kick();
        res.status(202).json(await deliveryView(ctx.db, row, TEST_EVENT_TYPE));
      },
    }),
  ];
}
