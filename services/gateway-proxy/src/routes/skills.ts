import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  decodePaymentHeader,
  MODE_HEADER,
  PAYMENT_HEADER,
  PaymentHeaderError,
  type PaymentProof,
  type PaymentRequirements,
  pickPaymentHeader,
  RECEIPT_HEADER,
  resourceFor,
} from '@paygate/agent-client';
import { formatUsdc, parseUsdc } from '@paygate/money';
import { clientIpOf, requestIdOf, sendJson } from '../http-util';
import type { PaymentFailure } from '../payments/failures';
import type { PaymentClaim, PresentOutcome, Purchase } from '../payments/service';
import type { ForwardResult } from '../proxy/forward';
import {
  type EndpointLookup,
  type EndpointSnapshot,
  findEndpoint,
  paymentKindOf,
  type SkillSnapshot,
} from '../skills/projection';
import type { GatewayState } from '../state';

const SKILL_PATH = /^\/([a-z0-9][a-z0-9-]*)(\/.*)?$/;

export interface SellerBase {
  protocol: string;
  hostname: string;
  port: string;
  pathPrefix: string;
}
// The seller's apiBaseUrl, parsed once.
const sellerBases = new Map<string, SellerBase | null>();
function sellerBase(apiBaseUrl: string): SellerBase | null {
  let base = sellerBases.get(apiBaseUrl);
  if (base === undefined) {
    try {
      const url = new URL(apiBaseUrl);
      base = {
        protocol: url.protocol,
        hostname: url.hostname.replace(/^\[|\]$/g, ''),
        port: url.port,
        pathPrefix: url.pathname.replace(/\/$/, ''),
      };
    } catch {
      base = null;
    }
    if (sellerBases.size >= 10_000) sellerBases.clear();
    sellerBases.set(apiBaseUrl, base);
  }
  return base;
}

// Decoding checksums three addresses (keccak): a subscriber repeating the same header skips that work.
const decodedHeaders = new Map<string, PaymentProof>();
function decodeCached(value: string): PaymentProof {
  let proof = decodedHeaders.get(value);
  if (!proof) {
    // Frozen: the payment service memoizes checks per proof object.
    proof = Object.freeze(decodePaymentHeader(value));
    if (decodedHeaders.size >= 10_000) decodedHeaders.clear();
    decodedHeaders.set(value, proof);
  }
  return proof;
}

function paymentHeaderOf(req: IncomingMessage): string | undefined {
  const headers = req.headers;
  return pickPaymentHeader((name) => headers[name.toLowerCase()]);
}

interface FoundPlan {
  lookup: { kind: 'found'; endpoint: EndpointSnapshot };
  resource: string;
  purchase: Purchase;
  base: SellerBase | null;
}
type RoutePlan = FoundPlan | { lookup: Exclude<EndpointLookup, { kind: 'found' }>; base: null };

/**
 * What a (skill snapshot, method, path) resolves to: the endpoint, the signed resource, the purchase and the
 * seller's URL. Pure in its inputs; keyed by the snapshot object, which the skill directory replaces whenever
 * it re-reads the projection, so a changed skill is never served from a stale plan.
 */
const routePlans = new WeakMap<SkillSnapshot, Map<string, RoutePlan>>();
function routePlanFor(
  state: GatewayState,
  skill: SkillSnapshot,
  name: string,
  method: string,
  path: string,
): RoutePlan {
  let plans = routePlans.get(skill);
  if (!plans) {
    plans = new Map();
    routePlans.set(skill, plans);
  }
  const key = `${method} ${name}${path}`;
  let plan = plans.get(key);
  if (plan) return plan;
  const lookup = findEndpoint(skill, method, path);
  if (lookup.kind !== 'found') plan = { lookup, base: null };
  else {
    const endpoint = lookup.endpoint;
    const kind = paymentKindOf(skill.type);
    const resource = resourceFor(method, `${state.config.publicBaseUrl}/api/v1/skills/${name}${path}`);
    plan = {
      lookup,
      resource,
      base: sellerBase(skill.apiBaseUrl),
      purchase: {
        resource,
        priceMicro: parseUsdc(endpoint.price),
        kind,
        durationDays: kind === 'subscription' ? (skill.durationDays ?? 30) : null,
        sellerId: skill.sellerId,
        skillId: skill.skillId,
        skillName: skill.name,
        endpointId: endpoint.endpointId,
        holdPeriodHours: skill.holdPeriodHours,
        channel: skill.mode === 'TICKET' ? 'ticket' : 'proxy',
      },
    };
  }
  // Paths with :param segments are open-ended: bound what one snapshot keeps.
  if (plans.size >= 1000) plans.clear();
  plans.set(key, plan);
  return plan;
}

/** The headers telling the seller who paid; a cached subscription claim is the same object on every call. */
const payerHeadersByClaim = new WeakMap<PaymentClaim, Readonly<Record<string, string>>>();
function payerHeaders(claim: PaymentClaim, skillName: string): Readonly<Record<string, string>> {
  let headers = payerHeadersByClaim.get(claim);
  if (!headers || headers['x-paygate-skill'] !== skillName) {
    headers = Object.freeze({
      'x-paygate-payer': claim.payer,
      'x-paygate-tx-hash': claim.tx_hash,
      'x-paygate-amount': formatUsdc(claim.amount_micro),
      'x-paygate-skill': skillName,
    });
    payerHeadersByClaim.set(claim, headers);
  }
  return headers;
}

/** The receipt header of a served call, the same object for every call of a cached subscription claim. */
const receiptHeadersByClaim = new WeakMap<PaymentClaim, Readonly<Record<string, string>>>();
function receiptHeaders(claim: PaymentClaim): Readonly<Record<string, string>> {
  let headers = receiptHeadersByClaim.get(claim);
  if (!headers) {
    headers = Object.freeze({ [RECEIPT_HEADER]: claim.tx_hash });
    receiptHeadersByClaim.set(claim, headers);
  }
  return headers;
}

function errorBody(requestId: string, code: string, message: string, extra: Record<string, unknown> = {}) {
  return { error: { code, message, ...extra, requestId } };
}

export function paymentRequirements(
  state: GatewayState,
  skill: SkillSnapshot,
  endpoint: EndpointSnapshot,
  resource: string,
): PaymentRequirements & { skill: string; endpoint: { method: string; path: string } } {
  const { config } = state;
  const kind = paymentKindOf(skill.type);
  const base = endpoint.description || skill.description;
  const description =
    kind === 'subscription'
      ? `${skill.displayName}: ${base} (${skill.durationDays ?? 30} days of access)`
      : `${skill.displayName}: ${base}`;
  return {
    price: formatUsdc(parseUsdc(endpoint.price)),
    description,
    network: config.network,
    chainId: config.chainId,
    payTo: config.escrowAddress,
    asset: config.usdcAddress,
    resource,
    confirmations: config.confirmations,
    type: kind,
    ...(kind === 'subscription' ? { durationDays: skill.durationDays ?? 30 } : {}),
    ...(kind === 'product' ? { requiresShipping: skill.requiresShipping ?? false } : {}),
    header: PAYMENT_HEADER,
    mode: skill.mode,
    skill: skill.name,
    endpoint: { method: endpoint.method, path: endpoint.path },
  };
}

function refuse(res: ServerResponse, failure: PaymentFailure, requirements: PaymentRequirements) {
  if (failure.reason === 'chain_unavailable') {
    res.setHeader('Retry-After', '2');
    sendJson(res, 503, { error: 'Payment not verified', reason: failure.reason, message: failure.message });
    return;
  }
  sendJson(res, 402, {
    error: 'Invalid payment',
    reason: failure.reason,
    message: failure.message,
    ...(failure.details ?? {}),
    requirements,
  });
}

/**
 * Paid skill URLs: {base_url}/api/v1/skills/<skill_name><path>. Unknown skill or path 404, wrong method 405,
 * no proof 402 with everything needed to pay, a bad header 400, a refused proof 402 with a reason; a
 * verified payment is forwarded to the seller (PROXY) or answered with a signed ticket (TICKET).
 */
export const SKILLS_PREFIX = '/api/v1/skills';

/**
 * Served on the bare node request (ahead of express, which costs more than the rest of a paid call), so
 * a paying subscriber's repeated call does only what it must.
 */
export function createSkillHandler(state: GatewayState) {
  const duration = state.ctx.metrics.httpDuration;
  const route = `${SKILLS_PREFIX}/:skill/*`;
  // One listener function for every response (no per-request closure): the start time rides on the response.
  function recordDuration(this: TimedResponse) {
    duration.observe(
      { method: this.req?.method ?? '', route, status: String(this.statusCode) },
      (performance.now() - (this[STARTED_AT] ?? 0)) / 1000,
    );
  }
  const fail = (res: ServerResponse, requestId: string, error: unknown) => {
    state.ctx.logger.error({ err: error, requestId }, 'paid skill call failed');
    if (!res.headersSent) sendJson(res, 500, errorBody(requestId, 'internal_error', 'internal error'));
    else res.destroy();
  };
  const acceptedReuse = state.metrics.accepted.labels('PROXY', 'false');
  return (req: IncomingMessage, res: ServerResponse): void => {
    const requestId = requestIdOf(req);
    res.setHeader('x-request-id', requestId);
    (res as TimedResponse)[STARTED_AT] = performance.now();
    res.once('finish', recordDuration);
    try {
      if (serveCachedSubscription(state, req, res, requestId, acceptedReuse, fail)) return;
    } catch (error) {
      fail(res, requestId, error);
      return;
    }
    handle(state, req, res, requestId).catch((error) => fail(res, requestId, error));
  };
}

type Fail = (res: ServerResponse, requestId: string, error: unknown) => void;

/**
 * A subscriber's repeated PROXY call, answered without a promise when every decision comes from memory: the
 * skill, the decoded header, the signature, the cached claim (presentCached runs every check the async path
 * runs on a cached claim) and the rate limit. It decides before touching the response; when any answer is
 * not in memory it returns false with nothing done, and `handle` serves the call from the start.
 */
function serveCachedSubscription(
  state: GatewayState,
  req: IncomingMessage,
  res: ServerResponse,
  requestId: string,
  acceptedReuse: { inc(): void },
  fail: Fail,
): boolean {
  const started = performance.now();
  const method = req.method ?? 'GET';
  if (method === 'HEAD') return false;
  const rawUrl = req.url ?? '/';
  const queryAt = rawUrl.indexOf('?');
  const fullPath = queryAt >= 0 ? rawUrl.slice(0, queryAt) : rawUrl;
  const match = SKILL_PATH.exec(fullPath.slice(SKILLS_PREFIX.length));
  if (!match) return false;
  const name = match[1]!;
  const skill = state.skills.peek(name)?.skill;
  if (skill?.status !== 'ACTIVE' || skill.mode !== 'PROXY') return false;
  const path = match[2] ?? '/';
  const plan = routePlanFor(state, skill, name, method, path);
  const base = plan.base;
  if (plan.lookup.kind !== 'found' || !base) return false;
  const headerValue = paymentHeaderOf(req);
  if (!headerValue) return false;
  let proof: PaymentProof;
  try {
    proof = decodeCached(headerValue);
  } catch {
    return false;
  }
  const { resource, purchase } = plan as FoundPlan;
  if (!state.payments.signedBy(proof, resource)) return false;
  const outcome = state.payments.presentCached(proof, purchase);
  if (!outcome?.ok) return false;
  // Counted only when decided here; undefined counts nothing (the async path counts it once).
  if (!state.rateLimitLocal(res, `wallet:${proof.from.toLowerCase()}:${skill.skillId}`)) return false;

  acceptedReuse.inc();
  const claim = outcome.claim;
  res.setHeader('Server-Timing', `chain;dur=0.00, paygate;dur=${(performance.now() - started).toFixed(2)}`);
  const query = queryAt >= 0 ? rawUrl.slice(queryAt) : '';
  state.forwardThen(
    req,
    res,
    {
      url: {
        protocol: base.protocol,
        hostname: base.hostname,
        port: base.port,
        path: `${base.pathPrefix}${path}${query}`,
      },
      clientIp: clientIpOf(req),
      extraHeaders: payerHeaders(claim, skill.name),
    },
    (result) => {
      try {
        if (result.kind === 'failed' || result.status >= 500) {
          answerUpstreamFailure(state, res, requestId, claim, result).catch((error) =>
            fail(res, requestId, error),
          );
          return;
        }
        result.relay(receiptHeaders(claim));
        if (claim.kind !== 'subscription')
          state.payments.markServed(claim).catch((error) => fail(res, requestId, error));
      } catch (error) {
        fail(res, requestId, error);
      }
    },
  );
  return true;
}

/** The seller failed (5xx or timeout): the payment stays usable for a retry within the window. */
async function answerUpstreamFailure(
  state: GatewayState,
  res: ServerResponse,
  requestId: string,
  claim: PaymentClaim,
  result: ForwardResult,
): Promise<void> {
  const retryUntil = await state.payments.markRetryable(claim);
  const retryHeaders: Record<string, string> = { [RECEIPT_HEADER]: claim.tx_hash };
  if (retryUntil) retryHeaders['X-402-Retry-Until'] = retryUntil.toISOString();
  if (result.kind === 'answered') {
    result.relay(retryHeaders);
    return;
  }
  for (const [header, value] of Object.entries(retryHeaders)) res.setHeader(header, value);
  sendJson(
    res,
    result.reason === 'timeout' ? 504 : 502,
    errorBody(requestId, 'upstream_failed', result.message, {
      txHash: claim.tx_hash,
      retryUntil: retryUntil?.toISOString() ?? null,
      retry: retryUntil
        ? 'present the same X-402-Payment header again for the same resource before retryUntil'
        : 'your subscription stays valid; call again',
    }),
  );
}

const STARTED_AT = Symbol('startedAt');
type TimedResponse = ServerResponse & { [STARTED_AT]?: number };

async function handle(state: GatewayState, req: IncomingMessage, res: ServerResponse, requestId: string) {
  {
    const started = performance.now();
    const rawUrl = req.url ?? '/';
    const queryAt = rawUrl.indexOf('?');
    const fullPath = queryAt >= 0 ? rawUrl.slice(0, queryAt) : rawUrl;
    const query = queryAt >= 0 ? rawUrl.slice(queryAt) : '';
    const method = req.method ?? 'GET';
    const match = SKILL_PATH.exec(fullPath.slice(SKILLS_PREFIX.length));
    if (!match) {
      sendJson(res, 404, errorBody(requestId, 'skill_not_found', 'no skill at this URL'));
      return;
    }
    const name = match[1]!;
    const path = match[2] ?? '/';
    const skill = state.skills.peek(name)?.skill ?? (await state.skills.byName(name));
    if (!skill) {
      sendJson(res, 404, errorBody(requestId, 'skill_not_found', `no skill named "${name}"`));
      return;
    }
    if (skill.status !== 'ACTIVE') {
      sendJson(
        res,
        404,
        errorBody(requestId, 'skill_not_active', `skill "${name}" is ${skill.status} and cannot be bought`),
      );
      return;
    }
    if (method === 'HEAD') {
      // Validation pings: say what the endpoint costs; nothing is forwarded or charged.
      const onPath = skill.endpoints.find(
        (e) => e.active && findEndpoint(skill, e.method, path).kind === 'found',
      );
      res.statusCode = onPath ? 200 : 404;
      if (onPath) {
        res.setHeader('X-402-Price', formatUsdc(parseUsdc(onPath.price)));
        res.setHeader('X-402-Network', state.config.network);
        res.setHeader('Allow', onPath.method);
      }
      res.end();
      return;
    }
    const plan = routePlanFor(state, skill, name, method, path);
    const lookup = plan.lookup;
    if (lookup.kind === 'no_path') {
      sendJson(
        res,
        404,
        errorBody(requestId, 'endpoint_not_found', `skill "${name}" has no endpoint at ${path}`, { path }),
      );
      return;
    }
    if (lookup.kind === 'wrong_method') {
      res.setHeader('Allow', lookup.allowed.join(', '));
      sendJson(
        res,
        405,
        errorBody(
          requestId,
          'method_not_allowed',
          `${path} of skill "${name}" answers ${lookup.allowed.join(', ')}, not ${method}`,
          { allowed: lookup.allowed },
        ),
      );
      return;
    }
    const endpoint = lookup.endpoint;
    const { resource, purchase } = plan as FoundPlan;
    const clientIp = clientIpOf(req);
    const clientBucket = `ip:${clientIp}:${skill.skillId}`;

    const headerValue = paymentHeaderOf(req);
    if (!headerValue) {
      if (!(state.rateLimitLocal(res, clientBucket) ?? (await state.rateLimit(res, requestId, clientBucket))))
        return;
      sendJson(res, 402, paymentRequirements(state, skill, endpoint, resource));
      return;
    }
    let proof: PaymentProof;
    try {
      proof = decodeCached(headerValue);
    } catch (error) {
      if (!(await state.rateLimit(res, requestId, clientBucket))) return;
      const e = error as PaymentHeaderError;
      const field = e instanceof PaymentHeaderError ? e.field : 'header';
      sendJson(
        res,
        400,
        errorBody(requestId, 'invalid_payment_header', `${PAYMENT_HEADER} ${e.message}`, {
          field: `${PAYMENT_HEADER}${field === 'header' ? '' : `.${field}`}`,
          rule: e instanceof PaymentHeaderError ? e.rule : 'is invalid',
        }),
      );
      return;
    }

    // A proof signed by its payer for this resource counts against that wallet before any chain lookup;
    // anything else counts against the client address, so nobody can spend another wallet's quota.
    const walletBucket = `wallet:${proof.from.toLowerCase()}:${skill.skillId}`;
    const signedHere = state.payments.signedBy(proof, resource);
    if (
      signedHere &&
      !(state.rateLimitLocal(res, walletBucket) ?? (await state.rateLimit(res, requestId, walletBucket)))
    )
      return;
    const outcome: PresentOutcome =
      state.payments.presentCached(proof, purchase) ?? (await state.payments.present(proof, purchase));
    if (!signedHere && !(await state.rateLimit(res, requestId, outcome.ok ? walletBucket : clientBucket)))
      return;
    if (!outcome.ok) {
      state.metrics.refused.inc({ reason: outcome.failure.reason });
      refuse(res, outcome.failure, paymentRequirements(state, skill, endpoint, resource));
      return;
    }
    state.metrics.accepted.inc({ mode: skill.mode, fresh: String(outcome.fresh) });
    const claim = outcome.claim;
    const ownMs = performance.now() - started - outcome.chainMs;
    res.setHeader(
      'Server-Timing',
      `chain;dur=${outcome.chainMs.toFixed(2)}, paygate;dur=${ownMs.toFixed(2)}`,
    );

    if (skill.mode === 'TICKET') {
      const { ticket, expiresAt } = state.tickets.issue({
        payer: claim.payer,
        skill: skill.name,
        skillId: skill.skillId,
        sellerId: skill.sellerId,
        method: endpoint.method,
        path,
        kind: claim.kind,
        txHash: claim.tx_hash,
        amount: formatUsdc(claim.amount_micro),
        notAfter: claim.access_expires_at,
      });
      res.setHeader(MODE_HEADER, 'TICKET');
      res.setHeader(RECEIPT_HEADER, claim.tx_hash);
      sendJson(res, 200, {
        ticket,
        header: 'X-402-Ticket',
        expiresAt: expiresAt.toISOString(),
        url: `${skill.apiBaseUrl.replace(/\/$/, '')}${path}${query}`,
        method: endpoint.method,
        txHash: claim.tx_hash,
        payer: claim.payer,
      });
      return;
    }

    const base = plan.base;
    if (!base) {
      await state.payments.markRetryable(claim);
      sendJson(
        res,
        502,
        errorBody(requestId, 'upstream_misconfigured', "the seller's apiBaseUrl is not a URL"),
      );
      return;
    }
    const result = await state.forward(req, res, {
      url: { ...base, path: `${base.pathPrefix}${path}${query}` },
      clientIp,
      extraHeaders: payerHeaders(claim, skill.name),
    });
    if (result.kind === 'failed' || result.status >= 500) {
      await answerUpstreamFailure(state, res, requestId, claim, result);
      return;
    }
    result.relay(receiptHeaders(claim));
    if (claim.kind !== 'subscription') await state.payments.markServed(claim);
  }
}
