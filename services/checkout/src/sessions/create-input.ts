import { assertValid, badRequest, checkIdempotencyKey, HttpError, requestFingerprint } from '@paygate/http';
import { MoneyFormatError, parseUsdc } from '@paygate/money';
import { PUBLISHABLE_KEY_PATTERN, type SellerAuth } from '@paygate/seller-auth';
import type { CheckoutConfig } from '../config';
import type { SkillEndpointRow } from '../db';
import type { CachedSkill, ProjectionCache } from '../projections/cache';
import { CheckoutReason } from '../reasons';
import type { CreatedAnswer } from './fast-path';
import type { SessionLimits } from './limits';
import { PublishableSessionBody, SecretSessionBody } from './schemas';
import type { NewSession, SessionStore } from './sessions';

/** Where sessions are created (the express route and the fast path). */
export const CREATE_PATH = '/api/v1/checkout/sessions';

const REPLAYED_HEADERS = Object.freeze({ 'Idempotent-Replayed': 'true' });
const NO_HEADERS = Object.freeze({});

const refused = (status: number, code: CheckoutReason, message: string, field: string, rule: string) =>
  new HttpError(status, code, message, { field, rule });
const keyRefused = (code: CheckoutReason, message: string, rule: string) =>
  refused(401, code, message, 'Authorization', rule);

export interface SessionCreatorDeps {
  config: CheckoutConfig;
  store: SessionStore;
  sellerAuth: SellerAuth;
  projections: ProjectionCache;
  limits: SessionLimits;
}

/** The create request after transport, shared by the express route and the fast path so both answer alike. */
export function sessionCreator(deps: SessionCreatorDeps) {
  return async function createSession(
    token: string | undefined,
    body: unknown,
    idempotencyKey: string | undefined,
    client: string | undefined,
  ): Promise<CreatedAnswer> {
    const input = await newSessionFor(deps, token, body, client);
    const key = checkIdempotencyKey(idempotencyKey);
    // Both transports create at the one path: a key replays across them.
    const claim = key
      ? { key, requestHash: requestFingerprint({ method: 'POST', path: CREATE_PATH, body }) }
      : undefined;
    // The seller's caps are conditions of the creation statement: a refusal is a 429 naming the cap, and a retry
    // of a session created before the cap was reached still replays it.
    const created = await deps.store.create(input, claim);
    // A replayed Idempotency-Key answers the first answer's body with 200 and a header.
    return created.replayed
      ? { status: 200, body: created.snapshot, headers: REPLAYED_HEADERS }
      : { status: 201, body: created.snapshot, headers: NO_HEADERS };
  };
}

/** The key decides which body applies: a publishable key's (widget) or a secret key's (seller's server). */
async function newSessionFor(
  deps: SessionCreatorDeps,
  token: string | undefined,
  body: unknown,
  client: string | undefined,
): Promise<NewSession> {
  if (!token) {
    const message = 'Authorization: Bearer pk_… (publishable) or Bearer sk_… (secret) is required';
    throw keyRefused(CheckoutReason.MissingKey, message, 'is required');
  }
  if (token.startsWith('pk_')) {
    if (!PUBLISHABLE_KEY_PATTERN.test(token)) {
      const message = 'publishable key is malformed';
      throw keyRefused(CheckoutReason.InvalidPublishableKey, message, 'must be Bearer pk_…');
    }
    // A browser's request: limited per key and per client address before anything is looked up.
    await deps.limits.admitRequest(token, client);
    return fromPublishableKey(deps.projections, token, body);
  }
  if (token.startsWith('sk_')) {
    // A seller's server: one client address serves many buyers, so only its key is limited.
    await deps.limits.admitRequest(token, undefined);
    return fromSecretKey(deps, token, body);
  }
  const message = 'expected a publishable (pk_…) or secret (sk_…) key';
  throw keyRefused(CheckoutReason.InvalidKey, message, 'must be Bearer pk_… or Bearer sk_…');
}

/** The widget's session: the seller's active skill and endpoint, at the endpoint's price. */
async function fromPublishableKey(
  projections: ProjectionCache,
  publishableKey: string,
  body: unknown,
): Promise<NewSession> {
  const input = assertValid(PublishableSessionBody, body ?? {}, 'body');
  const seller = await projections.sellerByPublishableKey(publishableKey);
  if (!seller) {
    const message = 'publishable key is not valid (unknown or rotated)';
    throw keyRefused(CheckoutReason.UnknownPublishableKey, message, 'must be a current publishable key');
  }
  const skill = await projections.skill(seller.sellerId, input.skill);
  if (!skill) {
    const message = `no skill "${input.skill}" for this seller`;
    const rule = 'must name one of the seller’s skills';
    throw refused(404, CheckoutReason.SkillNotFound, message, 'skill', rule);
  }
  if (skill.status !== 'ACTIVE') {
    const message = `skill "${input.skill}" is ${skill.status}, not ACTIVE`;
    throw refused(409, CheckoutReason.SkillNotActive, message, 'skill', 'must be ACTIVE');
  }
  const endpoint = chosenEndpoint(skill, input.endpointId);
  const priceMicro = parseUsdc(endpoint.price);
  if (priceMicro <= 0n) {
    const message = 'this endpoint has no price';
    throw refused(409, CheckoutReason.EndpointNotPriced, message, 'endpointId', 'must have a positive price');
  }
  return {
    sellerId: seller.sellerId,
    skillId: skill.skill_id,
    skillName: skill.name,
    endpointId: endpoint.endpointId,
    description: buyerDescription(skill.display_name, endpoint.description),
    priceMicro,
    holdPeriodHours: skill.hold_period_hours,
    matching: seller.matching,
  };
}

/** What the buyer reads ("Demo shop: A mug"), never the endpoint's method and path. */
function buyerDescription(displayName: string, endpointDescription: string): string {
  const what = endpointDescription.trim();
  return (what && what !== displayName.trim() ? `${displayName}: ${what}` : displayName).slice(0, 500);
}

/** The active endpoint named, or the skill's only active one when none is named. */
function chosenEndpoint(skill: CachedSkill, endpointId: string | undefined): SkillEndpointRow {
  const active = skill.endpoints.filter((e) => e.active);
  if (endpointId !== undefined) {
    const endpoint = active.find((e) => e.endpointId === endpointId);
    if (!endpoint) {
      const message = 'no active endpoint with this id';
      const rule = 'must name an active endpoint of the skill';
      throw refused(404, CheckoutReason.EndpointNotFound, message, 'endpointId', rule);
    }
    return endpoint;
  }
  if (active.length !== 1) {
    const several = 'is required when the skill has several endpoints';
    const rule = active.length === 0 ? 'skill has no active endpoint' : several;
    throw badRequest('endpointId', rule, `endpointId ${several}`);
  }
  return active[0]!;
}

/** The seller's server's session: any positive amount it names. */
async function fromSecretKey(
  { sellerAuth, config, projections }: SessionCreatorDeps,
  apiKey: string,
  body: unknown,
): Promise<NewSession> {
  const seller = await sellerAuth.resolve(apiKey);
  const input = assertValid(SecretSessionBody, body ?? {}, 'body');
  let priceMicro: bigint;
  try {
    priceMicro = parseUsdc(input.amount);
  } catch (error) {
    if (error instanceof MoneyFormatError) throw badRequest('amount', 'must be a USDC amount', error.message);
    throw error;
  }
  if (priceMicro <= 0n) throw badRequest('amount', 'must be greater than 0');
  return {
    sellerId: seller.sellerId,
    skillId: null,
    skillName: null,
    endpointId: null,
    description: input.description,
    priceMicro,
    holdPeriodHours: input.holdPeriodHours ?? config.defaultHoldPeriodHours,
    matching: await projections.matchingOf(seller.sellerId),
  };
}
