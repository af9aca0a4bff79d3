import { CheckoutSessionSnapshot } from '@paygate/contracts';
import {
  type AnyRoute,
  bearerTokenOf,
  clientAddress,
  defineRoute,
  idempotencyKeyParameter,
  notFound,
} from '@paygate/http';
import type { ServiceContext } from '@paygate/runtime';
import type { CheckoutConfig } from '../config';
import type { CheckoutDatabase } from '../db';
import { RetryLaterError } from '../errors';
import { CREATE_PATH, type SessionCreatorDeps, sessionCreator } from './create-input';
import { createSessionFastPath } from './fast-path';
import { SessionBody, SessionIdParam } from './schemas';
import type { SessionStore } from './sessions';
import { toSnapshot } from './snapshot';

const idempotencyKey = idempotencyKeyParameter(
  'Per seller: the same key with the same body returns the same session (200, Idempotent-Replayed: true); with another body, 409 idempotency_key_reused.',
);

type CreateSession = ReturnType<typeof sessionCreator>;

/** The session routes (behind `cors` on /api/v1/checkout). */
export function sessionRoutes(ctx: ServiceContext<CheckoutDatabase>, deps: SessionCreatorDeps): AnyRoute[] {
  const { config, store } = deps;
  const createSession = sessionCreator(deps);
  const create = createSessionRoute(createSession);
  // The widget's session creation is answered on the bare request, ahead of express; the rest goes to express.
  create.bare = {
    prefix: create.path,
    handle: createSessionFastPath({
      method: create.method,
      path: create.path,
      logger: ctx.logger,
      metrics: ctx.metrics,
      clientAddressOf: (req) => clientAddress(req, config.trustedProxies),
      createSession,
    }),
  };
  return [create, getSessionRoute(config, store)];
}

/**
 * Bearer pk_… (widget: { skill, endpointId? }) or sk_… (server: { amount, description, holdPeriodHours? }); the key
 * decides the body schema. Idempotency-Key is per seller.
 */
function createSessionRoute(createSession: CreateSession) {
  return defineRoute({
    method: 'post',
    path: CREATE_PATH,
    operationId: 'createCheckoutSession',
    summary: 'Create a checkout session with a unique exact amount',
    description:
      'With a publishable key (pk_…) the body names a skill (and endpoint) and the price comes from the registry; the browser cannot name an amount. With a secret key (sk_…) the seller’s server names any amount.',
    auth: { schemes: ['publishableKey', 'secretKey'] },
    headers: [idempotencyKey],
    body: SessionBody,
    bodyValidatedByHandler: true,
    bodyExamples: {
      widget: { skill: 'weather-report' },
      server: { amount: '12.50', description: 'Order #42', holdPeriodHours: 0 },
    },
    responses: {
      '201': { description: 'the new session', schema: CheckoutSessionSnapshot },
      '200': {
        description: 'replayed: the session created earlier with this Idempotency-Key',
        schema: CheckoutSessionSnapshot,
      },
    },
    errors: {
      '400': 'invalid_request (field and rule named)',
      '401':
        'missing_key | invalid_key | invalid_publishable_key | unknown_publishable_key | invalid_api_key | unknown_api_key',
      '404': 'skill_not_found | endpoint_not_found',
      '409': 'skill_not_active | endpoint_not_priced | idempotency_key_reused',
      '429':
        'rate_limited (per key, or per client address with a publishable key) | too_many_open_sessions (per seller); Retry-After says when to retry',
      '503':
        'session_not_created: the seller was at its open-session cap as the request was made and is no longer; retry (Retry-After)',
    },
    handler: async (req, res) => {
      try {
        const created = await createSession(
          bearerTokenOf(req.header('authorization')),
          req.body,
          req.header('idempotency-key'),
          req.ip,
        );
        res.set(created.headers).status(created.status).json(created.body);
      } catch (error) {
        if (error instanceof RetryLaterError) res.set('Retry-After', String(error.retryAfterSeconds));
        throw error;
      }
    },
  });
}

/** The polling route of the widget: public, the session id is an unguessable capability. */
function getSessionRoute(config: CheckoutConfig, store: SessionStore) {
  return defineRoute({
    method: 'get',
    path: '/api/v1/checkout/sessions/:id',
    operationId: 'getCheckoutSession',
    summary: 'The session (the widget’s polling route; the session id is the capability)',
    params: SessionIdParam,
    responses: {
      '200': {
        description: 'the session; an open session past expiresAt is expired on read',
        schema: CheckoutSessionSnapshot,
      },
    },
    errors: { '400': 'malformed session id', '404': 'no such session' },
    handler: async (req, res) => {
      const session = await store.get(req.params.id);
      if (!session) throw notFound('session');
      res.setHeader('Cache-Control', 'no-store');
      res.json(toSnapshot(session, config));
    },
  });
}
