import type { IncomingMessage, ServerResponse } from 'node:http';
import { clientAddress, errorResponse } from '@paygate/http';
import { formatUsdc, parseUsdc } from '@paygate/money';
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
} from '@paygate/protocol';
import { LRUCache } from 'lru-cache';
import { requestIdOf, sendJson } from '../http-util';
import { isUnavailable, type PaymentFailure } from '../payments/failures';
import type { PaymentClaim, PresentOutcome, Purchase } from '../payments/service';
import { sendPaywallPage, wantsPaywallPage } from '../paywall/page';
import type { ForwardFailureReason, ForwardResult, ForwardTarget } from '../proxy/forward';
import type { ForwardingKey } from '../proxy/forwarding-keys';
import {
  type EndpointLookup,
  type EndpointSnapshot,
  findEndpoint,
  paymentKindOf,
  type SkillSnapshot,
} from '../skills/projection';
import type { GatewayState } from '../state';
import {
  SKILL_CORS_HEADERS,
  SKILL_PREFLIGHT_HEADERS,
  settlementHeaders,
  x402Challenge,
} from '../x402/challenge';
import { settleAwaitingCopies } from '../x402/facilitator';
import {
  decodePaymentRequired,
  decodeX402Payment,
  pickX402Header,
  X402_HEADERS,
  X402HeaderError,
} from '../x402/protocol';

const SKILL_PATH = /^\/([a-z0-9][a-z0-9-]*)(\/.*)?$/;

/** A paid skill URL split into the skill's name, the endpoint path and the query (with its '?'). */
interface SkillUrl {
  name: string;
  path: string;
  query: string;
}

/** `${SKILLS_PREFIX}/<name><path>?<query>`, or undefined when no skill name can be read from it. */
function parseSkillUrl(rawUrl: string): SkillUrl | undefined {
  const queryAt = rawUrl.indexOf('?');
  const fullPath = queryAt >= 0 ? rawUrl.slice(0, queryAt) : rawUrl;
  const match = SKILL_PATH.exec(fullPath.slice(SKILLS_PREFIX.length));
  if (!match) return undefined;
  return { name: match[1]!, path: match[2] ?? '/', query: queryAt >= 0 ? rawUrl.slice(queryAt) : '' };
}

/** The rate-limit bucket of a paying wallet (a proof signed by its payer) and of an anonymous client. */
const walletBucket = (wallet: string, skillId: string) => `wallet:${wallet.toLowerCase()}:${skillId}`;
const clientBucket = (clientIp: string, skillId: string) => `ip:${clientIp}:${skillId}`;

const chainTiming = (chainMs: number, ownMs: number) =>
  `chain;dur=${chainMs.toFixed(2)}, paygate;dur=${ownMs.toFixed(2)}`;

export interface SellerBase {
  /** scheme://host[:port], what the connection pool is keyed by. */
  origin: string;
  pathPrefix: string;
}
// The seller's apiBaseUrl, parsed once.
const sellerBases = new LRUCache<string, { base: SellerBase | null }>({ max: 10_000 });
function sellerBase(apiBaseUrl: string): SellerBase | null {
  const known = sellerBases.get(apiBaseUrl);
  if (known) return known.base;
  let base: SellerBase | null;
  try {
    const url = new URL(apiBaseUrl);
    base =
      url.protocol === 'http:' || url.protocol === 'https:'
        ? { origin: url.origin, pathPrefix: url.pathname.replace(/\/$/, '') }
        : null;
  } catch {
    base = null;
  }
  sellerBases.set(apiBaseUrl, { base });
  return base;
}

// Decoding checksums three addresses (keccak): a subscriber repeating the same header skips that work.
const decodedHeaders = new LRUCache<string, PaymentProof>({ max: 10_000 });
function decodeCached(value: string): PaymentProof {
  let proof = decodedHeaders.get(value);
  if (!proof) {
    // Frozen: the payment service memoizes checks per proof object.
    proof = Object.freeze(decodePaymentHeader(value));
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
const routePlans = new WeakMap<SkillSnapshot, LRUCache<string, RoutePlan>>();
function routePlanFor(
  state: GatewayState,
  skill: SkillSnapshot,
  name: string,
  method: string,
  path: string,
): RoutePlan {
  let plans = routePlans.get(skill);
  if (!plans) {
    // Paths with :param segments are open-ended: bound what one snapshot keeps.
    plans = new LRUCache({ max: 1000 });
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

/** Any endpoint answering at `path` (the one its first allowed method resolves to), for HEAD. */
function endpointOnPath(skill: SkillSnapshot, path: string): EndpointSnapshot | undefined {
  const lookup = findEndpoint(skill, 'GET', path);
  if (lookup.kind === 'found') return lookup.endpoint;
  if (lookup.kind === 'no_path') return undefined;
  const other = findEndpoint(skill, lookup.allowed[0]!, path);
  return other.kind === 'found' ? other.endpoint : undefined;
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
  if (isUnavailable(failure)) {
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
export function createSkillHandler(
  state: GatewayState,
  options: {
    /** Off: every call takes the full path (the test comparing both paths answers each case through each). */
    cachedPath?: boolean;
  } = {},
) {
  const cachedPath = options.cachedPath ?? true;
  const duration = state.ctx.metrics.httpDuration;
  const route = `${SKILLS_PREFIX}/:skill/*`;
  // One listener function for every response (no per-request closure): the start time rides on the response.
  function recordDuration(this: TimedResponse) {
    duration.observe(
      { method: this.req?.method ?? '', route, status: String(this.statusCode) },
      (performance.now() - (this[STARTED_AT] ?? 0)) / 1000,
    );
  }
  // Answered like every express route (errorResponse): Postgres away or a service on the bus silent is a 503 with
  // Retry-After, not a 500 (make chaos saw the 402 challenge answer 500 while Postgres restarted).
  const fail = (res: ServerResponse, requestId: string, error: unknown) => {
    const { status, body } = errorResponse(error, requestId, (err) =>
      state.ctx.logger.error({ err, requestId }, 'paid skill call failed'),
    );
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (status === 503) res.setHeader('Retry-After', '1');
    sendJson(res, status, body);
  };
  const acceptedReuse = state.metrics.accepted.labels('PROXY', 'false');
  return (req: IncomingMessage, res: ServerResponse): void => {
    const requestId = requestIdOf(req);
    res.setHeader('x-request-id', requestId);
    (res as TimedResponse)[STARTED_AT] = performance.now();
    res.once('finish', recordDuration);
    if (req.method === 'OPTIONS') {
      // CORS preflight: browsers may pay from any origin (x402 and Paygate headers allowed).
      res.writeHead(204, SKILL_PREFLIGHT_HEADERS);
      res.end();
      return;
    }
    for (const name in SKILL_CORS_HEADERS)
      res.setHeader(name, SKILL_CORS_HEADERS[name as keyof typeof SKILL_CORS_HEADERS]);
    try {
      if (cachedPath && serveCachedSubscription(state, req, res, requestId, acceptedReuse, fail)) return;
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
  const url = parseSkillUrl(req.url ?? '/');
  if (!url) return false;
  const skill = state.skills.peek(url.name)?.skill;
  if (skill?.status !== 'ACTIVE' || skill.mode !== 'PROXY') return false;
  const found = routePlanFor(state, skill, url.name, method, url.path);
  if (found.lookup.kind !== 'found' || !found.base) return false;
  const plan = found as FoundPlan & { base: SellerBase };
  const forwardingKey = state.forwardingKeys.peek(skill.sellerId);
  if (forwardingKey === undefined) return false;
  const headerValue = paymentHeaderOf(req);
  if (!headerValue) return false;
  let proof: PaymentProof;
  try {
    proof = decodeCached(headerValue);
  } catch {
    return false;
  }
  // The async path's order, each answer from memory: signed here, the wallet's rate limit, the cached claim.
  if (!state.payments.signedBy(proof, plan.resource)) return false;
  const outcome = state.payments.presentCached(proof, plan.purchase);
  if (!outcome?.ok) return false;
  // Counted only when decided here; undefined counts nothing (the async path counts it once).
  if (!state.rateLimitLocal(res, walletBucket(proof.from, skill.skillId))) return false;

  acceptedReuse.inc();
  const claim = outcome.claim;
  res.setHeader('Server-Timing', chainTiming(0, performance.now() - started));
  const target = forwardTarget(
    plan.base,
    url,
    clientAddress(req, state.config.trustedProxies),
    claim,
    skill,
    forwardingKey,
  );
  state.forwardThen(req, res, target, (result) => {
    try {
      finishForward(state, res, requestId, claim, result, NO_HEADERS)?.catch((error) =>
        fail(res, requestId, error),
      );
    } catch (error) {
      fail(res, requestId, error);
    }
  });
  return true;
}

const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({});

function forwardTarget(
  base: SellerBase,
  url: SkillUrl,
  clientIp: string,
  claim: PaymentClaim,
  skill: SkillSnapshot,
  forwardingKey: ForwardingKey | null,
): ForwardTarget {
  return {
    url: { origin: base.origin, path: `${base.pathPrefix}${url.path}${url.query}` },
    clientIp,
    extraHeaders: payerHeaders(claim, skill.name),
    forwardingKey,
  };
}

/**
 * What the seller's answer makes of a paid call, for both paths: a failure (5xx, timeout) keeps the payment
 * usable for a retry; an answer is relayed with the receipt (and `answerHeaders`), and a pay-per-call is
 * spent. Undefined (no promise) for a subscription's relayed answer, the hot path's usual case.
 */
function finishForward(
  state: GatewayState,
  res: ServerResponse,
  requestId: string,
  claim: PaymentClaim,
  result: ForwardResult,
  answerHeaders: Readonly<Record<string, string>>,
): Promise<void> | undefined {
  if (result.kind === 'failed' || result.status >= 500) {
    return answerUpstreamFailure(state, res, requestId, claim, result, answerHeaders);
  }
  result.relay(
    answerHeaders === NO_HEADERS ? receiptHeaders(claim) : { ...receiptHeaders(claim), ...answerHeaders },
  );
  return claim.kind === 'subscription' ? undefined : state.payments.markServed(claim);
}

const FAILURE_STATUS: Record<ForwardFailureReason, number> = {
  timeout: 504,
  unreachable: 502,
  body_too_large: 413,
  body_incomplete: 400,
};

/**
 * The seller failed (5xx or timeout), or the buyer's body could not be forwarded (too large, cut short): the
 * payment stays usable for a retry within the window.
 */
async function answerUpstreamFailure(
  state: GatewayState,
  res: ServerResponse,
  requestId: string,
  claim: PaymentClaim,
  result: ForwardResult,
  answerHeaders: Readonly<Record<string, string>> = {},
): Promise<void> {
  const retryUntil = await state.payments.markRetryable(claim);
  const retryHeaders: Record<string, string> = { ...answerHeaders, [RECEIPT_HEADER]: claim.tx_hash };
  if (retryUntil) retryHeaders['X-402-Retry-Until'] = retryUntil.toISOString();
  if (result.kind === 'answered') {
    result.relay(retryHeaders);
    return;
  }
  for (const [header, value] of Object.entries(retryHeaders)) res.setHeader(header, value);
  const buyerFault = result.reason === 'body_too_large' || result.reason === 'body_incomplete';
  sendJson(
    res,
    FAILURE_STATUS[result.reason],
    errorBody(requestId, buyerFault ? result.reason : 'upstream_failed', result.message, {
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
    const method = req.method ?? 'GET';
    const url = parseSkillUrl(req.url ?? '/');
    if (!url) {
      sendJson(res, 404, errorBody(requestId, 'skill_not_found', 'no skill at this URL'));
      return;
    }
    const { name, path } = url;
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
      const onPath = endpointOnPath(skill, path);
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
    const clientIp = clientAddress(req, state.config.trustedProxies);
    const anonymousBucket = clientBucket(clientIp, skill.skillId);

    const x402Header = pickX402Header((name) => req.headers[name]);
    if (x402Header) {
      let decoded: ReturnType<typeof decodeX402Payment>;
      try {
        decoded = decodeX402Payment(x402Header.value, x402Header.version);
      } catch (error) {
        if (!(await state.rateLimit(res, requestId, anonymousBucket))) return;
        const message = error instanceof X402HeaderError ? error.message : 'the payment header is invalid';
        sendPaymentRequired(
          state,
          res,
          skill,
          endpoint,
          resource,
          url.query,
          402,
          'invalid_payload',
          message,
        );
        return;
      }
      // Counted against the paying wallet only when the payer signed it (as for X-402-Payment proofs).
      const wallet = state.x402.walletOf(decoded);
      if (
        !(await state.rateLimit(
          res,
          requestId,
          wallet ? walletBucket(wallet, skill.skillId) : anonymousBucket,
        ))
      )
        return;
      // A copy of a payment being settled waits for it, then is presented again (never a second call for one payment).
      const outcome = await settleAwaitingCopies(state, decoded, purchase, x402Header.version, {
        share: false,
      });
      if (!outcome.ok) {
        state.metrics.refused.inc({ reason: outcome.reason });
        if (outcome.status === 429) {
          res.setHeader('Retry-After', String(outcome.retryAfterSeconds ?? 60));
          sendJson(
            res,
            429,
            errorBody(requestId, outcome.reason, outcome.message, {
              retryAfterSeconds: outcome.retryAfterSeconds,
            }),
          );
          return;
        }
        if (outcome.status === 503) res.setHeader('Retry-After', '2');
        sendPaymentRequired(
          state,
          res,
          skill,
          endpoint,
          resource,
          url.query,
          outcome.status,
          outcome.reason,
          outcome.message,
        );
        return;
      }
      state.metrics.accepted.inc({ mode: skill.mode, fresh: String(outcome.fresh) });
      const t = outcome.timings;
      res.setHeader(
        'Server-Timing',
        `verify;dur=${t.verificationMs.toFixed(2)}, simulate;dur=${t.simulationMs.toFixed(2)}, submit;dur=${t.submissionMs.toFixed(2)}, include;dur=${t.inclusionMs.toFixed(2)}`,
      );
      await serveClaim(
        state,
        req,
        res,
        requestId,
        skill,
        endpoint,
        plan as FoundPlan,
        outcome.claim,
        url,
        clientIp,
        settlementHeaders({
          version: x402Header.version,
          txHash: outcome.txHash,
          chainId: state.config.chainId,
          payer: outcome.payer,
        }),
      );
      return;
    }

    const headerValue = paymentHeaderOf(req);
    if (!headerValue) {
      if (
        !(
          state.rateLimitLocal(res, anonymousBucket) ??
          (await state.rateLimit(res, requestId, anonymousBucket))
        )
      )
        return;
      if (wantsPaywallPage(req, false)) {
        sendPaywall(state, res, skill, endpoint, resource, url.query);
        return;
      }
      sendPaymentRequired(state, res, skill, endpoint, resource, url.query, 402);
      return;
    }
    let proof: PaymentProof;
    try {
      proof = decodeCached(headerValue);
    } catch (error) {
      if (!(await state.rateLimit(res, requestId, anonymousBucket))) return;
      const e = error as PaymentHeaderError;
      const field = e instanceof PaymentHeaderError ? e.field : 'header';
      const named = `${PAYMENT_HEADER}${field === 'header' ? '' : `.${field}`}`;
      const rule = e instanceof PaymentHeaderError ? e.rule : 'is invalid';
      sendJson(
        res,
        400,
        errorBody(requestId, 'invalid_payment_header', `${named} ${rule}`, { field: named, rule }),
      );
      return;
    }

    // A proof signed by its payer for this resource counts against that wallet before any chain lookup;
    // anything else counts against the client address, so nobody can spend another wallet's quota.
    const payerBucket = walletBucket(proof.from, skill.skillId);
    const signedHere = state.payments.signedBy(proof, resource);
    if (
      signedHere &&
      !(state.rateLimitLocal(res, payerBucket) ?? (await state.rateLimit(res, requestId, payerBucket)))
    )
      return;
    const outcome: PresentOutcome =
      state.payments.presentCached(proof, purchase) ?? (await state.payments.present(proof, purchase));
    if (!signedHere && !(await state.rateLimit(res, requestId, outcome.ok ? payerBucket : anonymousBucket)))
      return;
    if (!outcome.ok) {
      state.metrics.refused.inc({ reason: outcome.failure.reason });
      refuse(res, outcome.failure, paymentRequirements(state, skill, endpoint, resource));
      return;
    }
    state.metrics.accepted.inc({ mode: skill.mode, fresh: String(outcome.fresh) });
    const claim = outcome.claim;
    res.setHeader(
      'Server-Timing',
      chainTiming(outcome.chainMs, performance.now() - started - outcome.chainMs),
    );

    await serveClaim(
      state,
      req,
      res,
      requestId,
      skill,
      endpoint,
      plan as FoundPlan,
      claim,
      url,
      clientIp,
      NO_HEADERS,
    );
  }
}

/**
 * Serves a paid call once its payment is claimed: a TICKET answer, or the PROXY forward to the seller with the
 * payer headers; a seller failure leaves the payment usable for a retry. `answerHeaders` (x402's settlement
 * header) go on whatever the buyer receives.
 */
async function serveClaim(
  state: GatewayState,
  req: IncomingMessage,
  res: ServerResponse,
  requestId: string,
  skill: SkillSnapshot,
  endpoint: EndpointSnapshot,
  plan: FoundPlan,
  claim: PaymentClaim,
  url: SkillUrl,
  clientIp: string,
  answerHeaders: Readonly<Record<string, string>>,
): Promise<void> {
  const { path, query } = url;
  for (const name in answerHeaders) res.setHeader(name, answerHeaders[name]!);
  if (skill.mode === 'TICKET') {
    const { ticket, expiresAt } = await state.tickets.issue({
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
      errorBody(requestId, 'upstream_misconfigured', "the seller's apiBaseUrl is not an http(s) URL"),
    );
    return;
  }
  const forwardingKey = await state.forwardingKeys.keyFor(skill.sellerId);
  const result = await state.forward(
    req,
    res,
    forwardTarget(base, url, clientIp, claim, skill, forwardingKey),
  );
  await finishForward(state, res, requestId, claim, result, answerHeaders);
}

/** The 402 a browser gets: the paywall page, with the same offer and x402's PAYMENT-REQUIRED header. */
function sendPaywall(
  state: GatewayState,
  res: ServerResponse,
  skill: SkillSnapshot,
  endpoint: EndpointSnapshot,
  resource: string,
  /** The paid URL's query (with its '?'), as in sendPaymentRequired. */
  query: string,
): void {
  const requirements = paymentRequirements(state, skill, endpoint, resource);
  const priceMicro = parseUsdc(endpoint.price);
  const challenge = x402Challenge(
    state.x402,
    {
      url: `${resource.slice(resource.indexOf(' ') + 1)}${query}`,
      description: requirements.description,
      priceMicro,
      endpoint,
      skill,
    },
    'payment required',
  );
  const x402Header = challenge.headers[X402_HEADERS.paymentRequired];
  sendPaywallPage(
    res,
    {
      title: skill.displayName,
      description: requirements.description,
      price: requirements.price,
      networkLabel: state.config.network === 'local' ? 'the local test chain' : state.config.network,
      method: endpoint.method,
      requirements: { ...requirements, amountMicro: priceMicro.toString() },
      paymentRequired: x402Header ? decodePaymentRequired(x402Header) : undefined,
    },
    challenge.headers,
  );
}

/** A 402 (or 503) with what to pay: Paygate's body, x402's PAYMENT-REQUIRED header and, on Base, v1's accepts. */
function sendPaymentRequired(
  state: GatewayState,
  res: ServerResponse,
  skill: SkillSnapshot,
  endpoint: EndpointSnapshot,
  resource: string,
  /** The paid URL's query (with its '?'): x402's resource.url is the URL the client asked for, query included. */
  query: string,
  status: 402 | 503,
  reason?: string,
  message?: string,
): void {
  const requirements = paymentRequirements(state, skill, endpoint, resource);
  const url = `${resource.slice(resource.indexOf(' ') + 1)}${query}`;
  const challenge = x402Challenge(
    state.x402,
    { url, description: requirements.description, priceMicro: parseUsdc(endpoint.price), endpoint, skill },
    reason ?? 'payment required',
  );
  for (const [name, value] of Object.entries(challenge.headers)) res.setHeader(name, value);
  if (!reason) {
    sendJson(res, 402, { ...requirements, ...challenge.body });
    return;
  }
  sendJson(res, status, {
    error: status === 402 ? 'Invalid payment' : 'Payment not verified',
    reason,
    message,
    ...challenge.body,
    requirements,
  });
}
