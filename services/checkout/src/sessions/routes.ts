import type { IncomingMessage, ServerResponse } from 'node:http';
import { CheckoutSessionSnapshot } from '@paygate/contracts';
import {
  type AnyRoute,
  assertValid,
  bearerTokenOf,
  checkIdempotencyKey,
  clientAddress,
  defineRoute,
  HttpError,
  idempotencyKeyParameter,
  notFound,
  requestFingerprint,
} from '@paygate/http';
import { MoneyFormatError, parseUsdc } from '@paygate/money';
import type { ServiceContext } from '@paygate/runtime';
import { PUBLISHABLE_KEY_PATTERN, type SellerAuth } from '@paygate/seller-auth';
import type { CheckoutConfig } from '../config';
import type { CheckoutDatabase, CheckoutTrx } from '../db';
import type { ProjectionCache } from '../projections/cache';
import { type CreatedAnswer, createSessionFastPath } from './fast-path';
import { RetryLaterError, type SessionLimits } from './limits';
import { PublishableSessionBody, SecretSessionBody, SessionBody, SessionIdParam } from './schemas';
import type { CreatedSession, NewSession, SessionStore } from './sessions';
import { toSnapshot } from './snapshot';

/** Where sessions are created (the express route and the fast path). */
const CREATE_PATH = '/api/v1/checkout/sessions';

const REPLAYED_HEADERS = Object.freeze({ 'Idempotent-Replayed': 'true' });
const NO_HEADERS = Object.freeze({});

/** A created session is 201; a replayed Idempotency-Key answers the first answer's body with 200 and a header. */
function sessionCreatedAnswer(created: CreatedSession & { replayed: boolean }): CreatedAnswer {
  return created.replayed
    ? { status: 200, body: created.snapshot, headers: REPLAYED_HEADERS }
    : { status: 201, body: created.snapshot, headers: NO_HEADERS };
}

const idempotencyKey = idempotencyKeyParameter(
  'Per seller: the same key with the same body returns the same session (200, Idempotent-Replayed: true); with another body, 409 idempotency_key_reused.',
);

/**
 * The session routes (mounted behind `cors` on /api/v1/checkout), and the fast path that answers the create
 * route's widget requests ahead of express (the runtime's `fastPath`).
 */
export function sessionRoutes(
  ctx: ServiceContext<CheckoutDatabase>,
  config: CheckoutConfig,
  store: SessionStore,
  sellerAuth: SellerAuth,
  projections: ProjectionCache,
  limits: SessionLimits,
): { routes: AnyRoute[]; fastPath: (req: IncomingMessage, res: ServerResponse) => boolean } {
  const inTransaction = <T>(fn: (trx: CheckoutTrx) => Promise<T>) => ctx.inTransaction(fn);

  async function fromPublishableKey(publishableKey: string, body: unknown): Promise<NewSession> {
    const input = assertValid(PublishableSessionBody, body ?? {}, 'body');
    const seller = await projections.sellerByPublishableKey(publishableKey);
    if (!seller) {
      throw new HttpError(
        401,
        'unknown_publishable_key',
        'publishable key is not valid (unknown or rotated)',
        {
          field: 'Authorization',
          rule: 'must be a current publishable key',
        },
      );
    }
    const skill = await projections.skill(seller.sellerId, input.skill);
    if (!skill) {
      throw new HttpError(404, 'skill_not_found', `no skill "${input.skill}" for this seller`, {
        field: 'skill',
        rule: 'must name one of the seller’s skills',
      });
    }
    if (skill.status !== 'ACTIVE') {
      throw new HttpError(409, 'skill_not_active', `skill "${input.skill}" is ${skill.status}, not ACTIVE`, {
        field: 'skill',
        rule: 'must be ACTIVE',
      });
    }
    const active = skill.endpoints.filter((e) => e.active);
    let endpoint = active[0];
    if (input.endpointId !== undefined) {
      endpoint = active.find((e) => e.endpointId === input.endpointId);
      if (!endpoint)
        throw new HttpError(404, 'endpoint_not_found', 'no active endpoint with this id', {
          field: 'endpointId',
          rule: 'must name an active endpoint of the skill',
        });
    } else if (active.length !== 1) {
      throw new HttpError(
        400,
        'invalid_request',
        'endpointId is required when the skill has several endpoints',
        {
          field: 'endpointId',
          rule:
            active.length === 0
              ? 'skill has no active endpoint'
              : 'is required when the skill has several endpoints',
        },
      );
    }
    const priceMicro = parseUsdc(endpoint!.price);
    if (priceMicro <= 0n) {
      throw new HttpError(409, 'endpoint_not_priced', 'this endpoint has no price', {
        field: 'endpointId',
        rule: 'must have a positive price',
      });
    }
    return {
      sellerId: seller.sellerId,
      skillId: skill.skill_id,
      skillName: skill.name,
      endpointId: endpoint!.endpointId,
      description: `${skill.display_name}: ${endpoint!.method} ${endpoint!.path}`.slice(0, 500),
      priceMicro,
      holdPeriodHours: skill.hold_period_hours,
    };
  }

  async function fromSecretKey(apiKey: string, body: unknown): Promise<NewSession> {
    const seller = await sellerAuth.resolve(apiKey);
    const input = assertValid(SecretSessionBody, body ?? {}, 'body');
    let priceMicro: bigint;
    try {
      priceMicro = parseUsdc(input.amount);
    } catch (error) {
      if (error instanceof MoneyFormatError)
        throw new HttpError(400, 'invalid_request', error.message, {
          field: 'amount',
          rule: 'must be a USDC amount',
        });
      throw error;
    }
    if (priceMicro <= 0n) {
      throw new HttpError(400, 'invalid_request', 'amount must be greater than 0', {
        field: 'amount',
        rule: 'must be greater than 0',
      });
    }
    return {
      sellerId: seller.sellerId,
      skillId: null,
      skillName: null,
      endpointId: null,
      description: input.description,
      priceMicro,
      holdPeriodHours: input.holdPeriodHours ?? config.defaultHoldPeriodHours,
    };
  }

  /**
   * The whole create request after transport: the key, the body, the Idempotency-Key. Shared by the express
   * route and the fast path (fast-path.ts), so both answer exactly alike.
   */
  async function createSession(
    token: string | undefined,
    body: unknown,
    idempotencyKey: string | undefined,
    client: string | undefined,
  ): Promise<CreatedAnswer> {
    if (!token) {
      throw new HttpError(
        401,
        'missing_key',
        'Authorization: Bearer pk_… (publishable) or Bearer sk_… (secret) is required',
        {
          field: 'Authorization',
          rule: 'is required',
        },
      );
    }
    let input: NewSession;
    if (token.startsWith('pk_')) {
      if (!PUBLISHABLE_KEY_PATTERN.test(token)) {
        throw new HttpError(401, 'invalid_publishable_key', 'publishable key is malformed', {
          field: 'Authorization',
          rule: 'must be Bearer pk_…',
        });
      }
      // A browser's request: limited per key and per client address before anything is looked up.
      await limits.admitRequest(token, client);
      input = await fromPublishableKey(token, body);
    } else if (token.startsWith('sk_')) {
      // A seller's server: one client address serves many buyers, so only its key is limited.
      await limits.admitRequest(token, undefined);
      input = await fromSecretKey(token, body);
    } else {
      throw new HttpError(401, 'invalid_key', 'expected a publishable (pk_…) or secret (sk_…) key', {
        field: 'Authorization',
        rule: 'must be Bearer pk_… or Bearer sk_…',
      });
    }
    const key = checkIdempotencyKey(idempotencyKey);
    // Both transports create at the one path: a key replays across them.
    const claim = key
      ? { key, requestHash: requestFingerprint({ method: 'POST', path: CREATE_PATH, body }) }
      : undefined;
    // The seller's caps are conditions of the creation statement: a refusal is a 429 naming the cap, and a retry
    // of a session created before the cap was reached still replays it.
    return sessionCreatedAnswer(await store.create(input, claim));
  }

  /**
   * Authorization: Bearer pk_… (widget: { skill, endpointId? }) or Bearer sk_… (seller server:
   * { amount, description, holdPeriodHours? }). Idempotency-Key is honoured per seller. The key decides which
   * body schema applies, so `createSession` checks the key and then the body. The widget's requests
   * (publishable key, JSON body) are answered by the fast path ahead of express, through the same
   * `createSession`; this handler answers the rest.
   */
  const create = defineRoute({
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

  /** The polling route of the widget: public, the session id is an unguessable capability. */
  const get = defineRoute({
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
      const session = await store.get(req.params.id, inTransaction);
      if (!session) throw notFound('session');
      res.setHeader('Cache-Control', 'no-store');
      res.json(toSnapshot(session, config));
    },
  });

  return {
    routes: [create, get],
    // The widget's session creation, answered ahead of express by the runtime (`fastPath`).
    fastPath: createSessionFastPath({
      method: create.method,
      path: create.path,
      logger: ctx.logger,
      metrics: ctx.metrics,
      clientAddressOf: (req) => clientAddress(req, config.trustedProxies),
      createSession,
    }),
  };
}
