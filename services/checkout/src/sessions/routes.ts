import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { assertValid, HttpError, notFound } from '@paygate/http';
import { MoneyFormatError, parseUsdc } from '@paygate/money';
import type { ServiceContext } from '@paygate/runtime';
import { bearerToken, PUBLISHABLE_KEY_PATTERN, type SellerAuth } from '@paygate/seller-auth';
import type { Express } from 'express';
import type { CheckoutConfig } from '../config';
import type { CheckoutDatabase, CheckoutTrx } from '../db';
import type { ProjectionCache } from '../projections/cache';
import { cors, corsOnError } from './cors';
import { type CreatedAnswer, createSessionFastPath } from './fast-path';
import { PublishableSessionBody, SecretSessionBody, SessionIdParam } from './schemas';
import type { CreatedSession, NewSession, SessionStore } from './sessions';
import { toSnapshot } from './snapshot';

const IDEMPOTENCY_KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

const REPLAYED_HEADERS = Object.freeze({ 'Idempotent-Replayed': 'true' });
const NO_HEADERS = Object.freeze({});

/** A created session is 201; a replayed Idempotency-Key answers the first answer's body with 200 and a header. */
function sessionCreatedAnswer(created: CreatedSession & { replayed: boolean }): CreatedAnswer {
  return created.replayed
    ? { status: 200, body: created.snapshot, headers: REPLAYED_HEADERS }
    : { status: 201, body: created.snapshot, headers: NO_HEADERS };
}

export function sessionRoutes(
  app: Express,
  ctx: ServiceContext<CheckoutDatabase>,
  config: CheckoutConfig,
  store: SessionStore,
  sellerAuth: SellerAuth,
  projections: ProjectionCache,
): (req: IncomingMessage, res: ServerResponse) => boolean {
  const inTransaction = <T>(fn: (trx: CheckoutTrx) => Promise<T>) => ctx.inTransaction(fn);
  app.use('/api/v1/checkout', cors, corsOnError);

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
    let kind: 'publishable' | 'secret';
    if (token.startsWith('pk_')) {
      if (!PUBLISHABLE_KEY_PATTERN.test(token)) {
        throw new HttpError(401, 'invalid_publishable_key', 'publishable key is malformed', {
          field: 'Authorization',
          rule: 'must be Bearer pk_…',
        });
      }
      kind = 'publishable';
      input = await fromPublishableKey(token, body);
    } else if (token.startsWith('sk_')) {
      kind = 'secret';
      input = await fromSecretKey(token, body);
    } else {
      throw new HttpError(401, 'invalid_key', 'expected a publishable (pk_…) or secret (sk_…) key', {
        field: 'Authorization',
        rule: 'must be Bearer pk_… or Bearer sk_…',
      });
    }
    if (idempotencyKey !== undefined && !IDEMPOTENCY_KEY_PATTERN.test(idempotencyKey)) {
      throw new HttpError(400, 'invalid_request', 'Idempotency-Key must be 1-255 visible ASCII characters', {
        field: 'Idempotency-Key',
        rule: 'must be 1-255 visible ASCII characters',
      });
    }
    const claim = idempotencyKey
      ? {
          key: idempotencyKey,
          requestHash: createHash('sha256')
            .update(`${kind}\n${canonicalJson(body ?? {})}`)
            .digest('hex'),
        }
      : undefined;
    return sessionCreatedAnswer(await store.create(input, claim));
  }

  /**
   * Authorization: Bearer pk_… (widget: { skill, endpointId? }) or Bearer sk_… (seller server:
   * { amount, description, holdPeriodHours? }). Idempotency-Key is honoured per seller. The widget's
   * requests (publishable key, JSON body) are answered by the fast path ahead of express; this route
   * answers the rest.
   */
  app.post('/api/v1/checkout/sessions', async (req, res) => {
    const created = await createSession(bearerToken(req), req.body, req.header('idempotency-key'));
    res.set(created.headers).status(created.status).json(created.body);
  });

  /** The polling route of the widget: public, the session id is an unguessable capability. */
  app.get('/api/v1/checkout/sessions/:id', async (req, res) => {
    const { id } = assertValid(SessionIdParam, { id: req.params.id }, 'params');
    const session = await store.get(id, inTransaction);
    if (!session) throw notFound('session');
    res.setHeader('Cache-Control', 'no-store');
    res.json(toSnapshot(session, config));
  });

  // The widget's session creation, answered ahead of express by the runtime (`fastPath`).
  return createSessionFastPath({
    path: '/api/v1/checkout/sessions',
    logger: ctx.logger,
    metrics: ctx.metrics,
    createSession,
  });
}
