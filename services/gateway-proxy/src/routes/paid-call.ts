import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorResponse, clientAddress as readClientAddress, type SharedRateLimiter } from '@paygate/http';
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
import type { ServiceMetrics } from '@paygate/runtime';
import type { Logger } from '@paygate/telemetry';
import { LRUCache } from 'lru-cache';
import type { GatewayProxyConfig } from '../config';
import { requestIdOf, sendJson } from '../http-util';
import { isUnavailable, type PaymentFailure } from '../payments/failures';
import type { PaymentClaim, PaymentService, PresentOutcome, Purchase } from '../payments/service';
import { sendPaywallPage, wantsPaywallPage } from '../paywall/page';
import {
  type ForwardFailureReason,
  type ForwardOptions,
  type ForwardResult,
  forwardRequest,
} from '../proxy/forward';
import type { ForwardingKeys } from '../proxy/forwarding-keys';
import { clientBucket, limitCall, walletBucket } from '../rate-limit';
import {
  type EndpointLookup,
  type EndpointSnapshot,
  findEndpoint,
  paymentKindOf,
  type SkillDirectory,
  type SkillSnapshot,
} from '../skills/projection';
import type { TicketIssuer } from '../tickets/issuer';
import {
  SKILL_CORS_HEADERS,
  SKILL_PREFLIGHT_HEADERS,
  settlementHeaders,
  x402Challenge,
} from '../x402/challenge';
import type { X402Outcome, X402Payments } from '../x402/payments';
import {
  type DecodedX402Payment,
  decodePaymentRequired,
  decodeX402Payment,
  pickX402Header,
  X402_HEADERS,
  X402HeaderError,
} from '../x402/protocol';

/**
 * Paid skill URLs: {base_url}/api/v1/skills/<skill_name><path>. Unknown skill or path 404, wrong method 405,
 * no proof 402 with everything needed to pay, a bad header 400, a refused proof 402 with a reason; a
 * verified payment is forwarded to the seller (PROXY) or answered with a signed ticket (TICKET).
 */
export const SKILLS_PREFIX = '/api/v1/skills';

/**
 * What a paid call uses, and nothing else: each step below takes these explicitly rather than reaching through the
 * gateway's whole state.
 */
export interface PaidCallDeps {
  config: Pick<
    GatewayProxyConfig,
    | 'publicBaseUrl'
    | 'trustedProxies'
    | 'network'
    | 'chainId'
    | 'escrowAddress'
    | 'usdcAddress'
    | 'confirmations'
  >;
  logger: Logger;
  skills: SkillDirectory;
  /** Per wallet (or client address) per skill per minute. */
  limiter: SharedRateLimiter;
  /** Tx-hash proofs: verified, then claimed. */
  payments: PaymentService;
  /** x402's offer (the challenge) and the payer an authorization names. */
  x402: X402Payments;
  /** Settles an x402 payment (a copy of one being settled waits for it, never a second call for one payment). */
  settleX402(payment: DecodedX402Payment, purchase: Purchase, version: 1 | 2): Promise<X402Outcome>;
  tickets: TicketIssuer;
  forwardingKeys: ForwardingKeys;
  forwarding: ForwardOptions;
  metrics: {
    accepted: { inc(labels: { mode: string; fresh: string }): void };
    refused: { inc(labels: { reason: string }): void };
    rateLimited: { inc(): void };
    httpDuration: ServiceMetrics['httpDuration'];
  };
}

/**
 * The paid call, one pipeline: find what is offered at the URL, read the proof, count it against the rate limit,
 * then challenge (no proof) or verify and claim the payment, forward the call, and book what the seller's answer
 * made of the payment. Each step answers the buyer itself when the call stops there.
 */
async function paidCall(deps: PaidCallDeps, call: Call): Promise<void> {
  const offer = await findOffer(deps, call);
  if (!offer) return;
  const proof = readProof(call);
  await limitCall(deps.limiter, deps.metrics.rateLimited, call.res, rateBucket(deps, offer, call, proof));
  if (proof.kind === 'none') return challenge(deps, offer, call);
  if (proof.kind === 'unreadable') return refuseUnreadable(deps, offer, call, proof);
  const paid =
    proof.kind === 'x402'
      ? await settleX402(deps, offer, call, proof)
      : await verifyAndClaim(deps, offer, call, proof);
  if (!paid) return;
  const answer = await forward(deps, offer, call, paid);
  if (answer) await book(deps, call, paid, answer);
}

/** One paid call in flight: the request, its answer, and what every step reads of it. */
interface Call {
  req: IncomingMessage;
  res: ServerResponse;
  requestId: string;
  /** performance.now() when the call arrived (Server-Timing's `paygate`). */
  started: number;
  method: string;
  url: SkillUrl;
  clientIp: string;
}

/** A paid skill URL split into the skill's name, the endpoint path and the query (with its '?'). */
interface SkillUrl {
  name: string;
  path: string;
  query: string;
}

const SKILL_PATH = /^\/([a-z0-9][a-z0-9-]*)(\/.*)?$/;

/** `${SKILLS_PREFIX}/<name><path>?<query>`, or undefined when no skill name can be read from it. */
function parseSkillUrl(rawUrl: string): SkillUrl | undefined {
  const queryAt = rawUrl.indexOf('?');
  const fullPath = queryAt >= 0 ? rawUrl.slice(0, queryAt) : rawUrl;
  const match = SKILL_PATH.exec(fullPath.slice(SKILLS_PREFIX.length));
  if (!match) return undefined;
  return { name: match[1]!, path: match[2] ?? '/', query: queryAt >= 0 ? rawUrl.slice(queryAt) : '' };
}

// ---- find the offer -------------------------------------------------------------------------------------------

export interface SellerBase {
  /** scheme://host[:port], what the connection pool is keyed by. */
  origin: string;
  pathPrefix: string;
}

/** What is sold at a (skill, method, path): the endpoint, the signed resource, the purchase and the seller's URL. */
interface Offer {
  kind: 'found';
  skill: SkillSnapshot;
  endpoint: EndpointSnapshot;
  resource: string;
  purchase: Purchase;
  /** null: the seller's apiBaseUrl is not an http(s) URL (a PROXY call then fails after the claim, retryable). */
  base: SellerBase | null;
}
type Plan = Offer | Exclude<EndpointLookup, { kind: 'found' }>;

/**
 * Plans by (method, path), per skill snapshot: a pure function of the snapshot, which the skill directory replaces
 * whenever it re-reads the projection, so a changed skill is never served from a stale plan.
 */
const plansBySnapshot = new WeakMap<SkillSnapshot, LRUCache<string, Plan>>();

function planFor(deps: PaidCallDeps, skill: SkillSnapshot, method: string, path: string): Plan {
  let plans = plansBySnapshot.get(skill);
  if (!plans) {
    // Paths with :param segments are open-ended: bound what one snapshot keeps.
    plans = new LRUCache({ max: 1000 });
    plansBySnapshot.set(skill, plans);
  }
  const key = `${method} ${path}`;
  let plan = plans.get(key);
  if (plan) return plan;
  const lookup = findEndpoint(skill, method, path);
  if (lookup.kind !== 'found') plan = lookup;
  else {
    const endpoint = lookup.endpoint;
    const kind = paymentKindOf(skill.type);
    const resource = resourceFor(method, `${deps.config.publicBaseUrl}${SKILLS_PREFIX}/${skill.name}${path}`);
    plan = {
      kind: 'found',
      skill,
      endpoint,
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
        claimedVia: skill.mode === 'TICKET' ? 'ticket' : 'proxy',
      },
    };
  }
  plans.set(key, plan);
  return plan;
}

function sellerBase(apiBaseUrl: string): SellerBase | null {
  try {
    const url = new URL(apiBaseUrl);
    return url.protocol === 'http:' || url.protocol === 'https:'
      ? { origin: url.origin, pathPrefix: url.pathname.replace(/\/$/, '') }
      : null;
  } catch {
    return null;
  }
}

/** The offer at the call's URL, or the 404 / 405 / HEAD answer (undefined then). */
async function findOffer(deps: PaidCallDeps, call: Call): Promise<Offer | undefined> {
  const { res, requestId, method } = call;
  const { name, path } = call.url;
  const skill = deps.skills.peek(name)?.skill ?? (await deps.skills.byName(name));
  if (!skill) {
    sendJson(res, 404, errorBody(requestId, 'skill_not_found', `no skill named "${name}"`));
    return undefined;
  }
  if (skill.status !== 'ACTIVE') {
    sendJson(
      res,
      404,
      errorBody(requestId, 'skill_not_active', `skill "${name}" is ${skill.status} and cannot be bought`),
    );
    return undefined;
  }
  if (method === 'HEAD') {
    // Validation pings: say what the endpoint costs; nothing is forwarded or charged.
    const onPath = endpointOnPath(skill, path);
    res.statusCode = onPath ? 200 : 404;
    if (onPath) {
      res.setHeader('X-402-Price', formatUsdc(parseUsdc(onPath.price)));
      res.setHeader('X-402-Network', deps.config.network);
      res.setHeader('Allow', onPath.method);
    }
    res.end();
    return undefined;
  }
  const plan = planFor(deps, skill, method, path);
  if (plan.kind === 'no_path') {
    sendJson(
      res,
      404,
      errorBody(requestId, 'endpoint_not_found', `skill "${name}" has no endpoint at ${path}`, { path }),
    );
    return undefined;
  }
  if (plan.kind === 'wrong_method') {
    res.setHeader('Allow', plan.allowed.join(', '));
    sendJson(
      res,
      405,
      errorBody(
        requestId,
        'method_not_allowed',
        `${path} of skill "${name}" answers ${plan.allowed.join(', ')}, not ${method}`,
        { allowed: plan.allowed },
      ),
    );
    return undefined;
  }
  return plan;
}

/** Any endpoint answering at `path` (the one its first allowed method resolves to), for HEAD. */
function endpointOnPath(skill: SkillSnapshot, path: string): EndpointSnapshot | undefined {
  const lookup = findEndpoint(skill, 'GET', path);
  if (lookup.kind === 'found') return lookup.endpoint;
  if (lookup.kind === 'no_path') return undefined;
  const other = findEndpoint(skill, lookup.allowed[0]!, path);
  return other.kind === 'found' ? other.endpoint : undefined;
}

// ---- read the proof -------------------------------------------------------------------------------------------

type Proof =
  | { kind: 'none' }
  /** A header that does not decode: x402's answers 402 invalid_payload, X-402-Payment's 400 naming the field. */
  | { kind: 'unreadable'; x402: boolean; message: string; field?: string; rule?: string }
  | { kind: 'x402'; payment: DecodedX402Payment; version: 1 | 2 }
  | { kind: 'tx-hash'; proof: PaymentProof };

// Decoding checksums three addresses (keccak): a subscriber repeating the same header skips that work. Frozen:
// the payment service memoizes its checks per proof object.
const decodedTxHashProofs = new LRUCache<string, PaymentProof>({ max: 10_000 });

function readProof(call: Call): Proof {
  const headers = call.req.headers;
  const x402Header = pickX402Header((name) => headers[name]);
  if (x402Header) {
    try {
      return {
        kind: 'x402',
        payment: decodeX402Payment(x402Header.value, x402Header.version),
        version: x402Header.version,
      };
    } catch (error) {
      const message = error instanceof X402HeaderError ? error.message : 'the payment header is invalid';
      return { kind: 'unreadable', x402: true, message };
    }
  }
  const value = pickPaymentHeader((name) => headers[name.toLowerCase()]);
  if (!value) return { kind: 'none' };
  let proof = decodedTxHashProofs.get(value);
  if (!proof) {
    try {
      proof = Object.freeze(decodePaymentHeader(value));
    } catch (error) {
      const field = error instanceof PaymentHeaderError ? error.field : 'header';
      const named = `${PAYMENT_HEADER}${field === 'header' ? '' : `.${field}`}`;
      const rule = error instanceof PaymentHeaderError ? error.rule : 'is invalid';
      return { kind: 'unreadable', x402: false, message: `${named} ${rule}`, field: named, rule };
    }
    decodedTxHashProofs.set(value, proof);
  }
  return { kind: 'tx-hash', proof };
}

/**
 * Whose quota the call spends: a proof its payer signed (for this resource) counts against that wallet, before
 * any chain lookup; anything else against the client address, so nobody can spend another wallet's quota.
 */
function rateBucket(deps: PaidCallDeps, offer: Offer, call: Call, proof: Proof): string {
  const skillId = offer.skill.skillId;
  if (proof.kind === 'x402') {
    const wallet = deps.x402.walletOf(proof.payment);
    if (wallet) return walletBucket(wallet, skillId);
  }
  if (proof.kind === 'tx-hash' && deps.payments.signedBy(proof.proof, offer.resource)) {
    return walletBucket(proof.proof.from, skillId);
  }
  return clientBucket(call.clientIp, skillId);
}

// ---- challenge ------------------------------------------------------------------------------------------------

/** No proof: the 402 with what to pay (a browser gets the paywall page with the same offer). */
function challenge(deps: PaidCallDeps, offer: Offer, call: Call): void {
  if (wantsPaywallPage(call.req, false)) sendPaywall(deps, offer, call);
  else sendPaymentRequired(deps, offer, call, 402);
}

function refuseUnreadable(
  deps: PaidCallDeps,
  offer: Offer,
  call: Call,
  proof: Extract<Proof, { kind: 'unreadable' }>,
): void {
  if (proof.x402) {
    sendPaymentRequired(deps, offer, call, 402, 'invalid_payload', proof.message);
    return;
  }
  sendJson(
    call.res,
    400,
    errorBody(call.requestId, 'invalid_payment_header', proof.message, {
      field: proof.field,
      rule: proof.rule,
    }),
  );
}

export function paymentRequirements(
  config: PaidCallDeps['config'],
  skill: SkillSnapshot,
  endpoint: EndpointSnapshot,
  resource: string,
): PaymentRequirements & { skill: string; endpoint: { method: string; path: string } } {
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

/** x402's challenge for the offer; its resource.url is the URL the client asked for, query included. */
function challengeFor(deps: PaidCallDeps, offer: Offer, call: Call, description: string, error: string) {
  const { resource, endpoint, skill } = offer;
  return x402Challenge(
    deps.x402,
    {
      url: `${resource.slice(resource.indexOf(' ') + 1)}${call.url.query}`,
      description,
      priceMicro: offer.purchase.priceMicro,
      endpoint,
      skill,
    },
    error,
  );
}

/** The 402 a browser gets: the paywall page, with the same offer and x402's PAYMENT-REQUIRED header. */
function sendPaywall(deps: PaidCallDeps, offer: Offer, call: Call): void {
  const { skill, endpoint } = offer;
  const requirements = paymentRequirements(deps.config, skill, endpoint, offer.resource);
  const challenge = challengeFor(deps, offer, call, requirements.description, 'payment required');
  const x402Header = challenge.headers[X402_HEADERS.paymentRequired];
  sendPaywallPage(
    call.res,
    {
      title: skill.displayName,
      description: requirements.description,
      price: requirements.price,
      networkLabel: deps.config.network === 'local' ? 'the local test chain' : deps.config.network,
      method: endpoint.method,
      requirements: { ...requirements, amountMicro: offer.purchase.priceMicro.toString() },
      paymentRequired: x402Header ? decodePaymentRequired(x402Header) : undefined,
    },
    challenge.headers,
  );
}

/** A 402 (or 503) with what to pay: Paygate's body, x402's PAYMENT-REQUIRED header and, on Base, v1's accepts. */
function sendPaymentRequired(
  deps: PaidCallDeps,
  offer: Offer,
  call: Call,
  status: 402 | 503,
  reason?: string,
  message?: string,
): void {
  const requirements = paymentRequirements(deps.config, offer.skill, offer.endpoint, offer.resource);
  const challenge = challengeFor(deps, offer, call, requirements.description, reason ?? 'payment required');
  for (const [name, value] of Object.entries(challenge.headers)) call.res.setHeader(name, value);
  if (!reason) {
    sendJson(call.res, 402, { ...requirements, ...challenge.body });
    return;
  }
  sendJson(call.res, status, {
    error: status === 402 ? 'Invalid payment' : 'Payment not verified',
    reason,
    message,
    ...challenge.body,
    requirements,
  });
}

// ---- verify and claim -----------------------------------------------------------------------------------------

/** A claimed payment, and the headers its answer carries whatever it is (x402's settlement header). */
interface Paid {
  claim: PaymentClaim;
  answerHeaders: Readonly<Record<string, string>>;
}
const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({});

/** A tx-hash proof (Paygate's own scheme): verified (signature, fields, on chain), then its transfer claimed. */
async function verifyAndClaim(
  deps: PaidCallDeps,
  offer: Offer,
  call: Call,
  { proof }: Extract<Proof, { kind: 'tx-hash' }>,
): Promise<Paid | undefined> {
  const verified = await deps.payments.verify(proof, offer.purchase);
  let claimMs = 0;
  let outcome: PresentOutcome;
  if (verified.kind === 'decided') outcome = verified.outcome;
  else {
    const claimStarted = performance.now();
    outcome = await deps.payments.claim(proof, verified, offer.purchase);
    claimMs = performance.now() - claimStarted;
  }
  if (!outcome.ok) {
    deps.metrics.refused.inc({ reason: outcome.failure.reason });
    refuse(
      call.res,
      outcome.failure,
      paymentRequirements(deps.config, offer.skill, offer.endpoint, offer.resource),
    );
    return undefined;
  }
  deps.metrics.accepted.inc({ mode: offer.skill.mode, fresh: String(outcome.fresh) });
  const paygateMs = performance.now() - call.started - outcome.chainMs;
  call.res.setHeader(
    'Server-Timing',
    claimMs
      ? `chain;dur=${outcome.chainMs.toFixed(2)}, paygate;dur=${paygateMs.toFixed(2)}, claim;dur=${claimMs.toFixed(2)}`
      : `chain;dur=${outcome.chainMs.toFixed(2)}, paygate;dur=${paygateMs.toFixed(2)}`,
  );
  return { claim: outcome.claim, answerHeaders: NO_HEADERS };
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

/** An x402 payment (the standard exact scheme): verified, submitted by the relayer and claimed once included. */
async function settleX402(
  deps: PaidCallDeps,
  offer: Offer,
  call: Call,
  { payment, version }: Extract<Proof, { kind: 'x402' }>,
): Promise<Paid | undefined> {
  const outcome = await deps.settleX402(payment, offer.purchase, version);
  if (!outcome.ok) {
    deps.metrics.refused.inc({ reason: outcome.reason });
    if (outcome.status === 429) {
      call.res.setHeader('Retry-After', String(outcome.retryAfterSeconds ?? 60));
      sendJson(
        call.res,
        429,
        errorBody(call.requestId, outcome.reason, outcome.message, {
          retryAfterSeconds: outcome.retryAfterSeconds,
        }),
      );
      return undefined;
    }
    if (outcome.status === 503) call.res.setHeader('Retry-After', '2');
    sendPaymentRequired(deps, offer, call, outcome.status, outcome.reason, outcome.message);
    return undefined;
  }
  deps.metrics.accepted.inc({ mode: offer.skill.mode, fresh: String(outcome.fresh) });
  const t = outcome.timings;
  call.res.setHeader(
    'Server-Timing',
    `verify;dur=${t.verificationMs.toFixed(2)}, simulate;dur=${t.simulationMs.toFixed(2)}, submit;dur=${t.submissionMs.toFixed(2)}, include;dur=${t.inclusionMs.toFixed(2)}`,
  );
  return {
    claim: outcome.claim,
    answerHeaders: settlementHeaders({
      version,
      txHash: outcome.txHash,
      chainId: deps.config.chainId,
      payer: outcome.payer,
    }),
  };
}

// ---- forward --------------------------------------------------------------------------------------------------

/**
 * Serves a claimed call: a TICKET answer (the call is then done), or the PROXY forward to the seller with the
 * payer headers, whose result `book` decides on.
 */
async function forward(
  deps: PaidCallDeps,
  offer: Offer,
  call: Call,
  paid: Paid,
): Promise<ForwardResult | undefined> {
  const { skill, endpoint, base } = offer;
  const { claim } = paid;
  const { res, url } = call;
  for (const name in paid.answerHeaders) res.setHeader(name, paid.answerHeaders[name]!);
  if (skill.mode === 'TICKET') {
    const { ticket, expiresAt } = await deps.tickets.issue({
      payer: claim.payer,
      skill: skill.name,
      skillId: skill.skillId,
      sellerId: skill.sellerId,
      method: endpoint.method,
      path: url.path,
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
      url: `${skill.apiBaseUrl.replace(/\/$/, '')}${url.path}${url.query}`,
      method: endpoint.method,
      txHash: claim.tx_hash,
      payer: claim.payer,
    });
    return undefined;
  }
  if (!base) {
    await deps.payments.markRetryable(claim);
    sendJson(
      res,
      502,
      errorBody(call.requestId, 'upstream_misconfigured', "the seller's apiBaseUrl is not an http(s) URL"),
    );
    return undefined;
  }
  const forwardingKey =
    deps.forwardingKeys.peek(skill.sellerId) ?? (await deps.forwardingKeys.keyFor(skill.sellerId));
  return forwardRequest(
    call.req,
    res,
    {
      url: { origin: base.origin, path: `${base.pathPrefix}${url.path}${url.query}` },
      clientIp: call.clientIp,
      extraHeaders: {
        'x-paygate-payer': claim.payer,
        'x-paygate-tx-hash': claim.tx_hash,
        'x-paygate-amount': formatUsdc(claim.amount_micro),
        'x-paygate-skill': skill.name,
      },
      forwardingKey,
    },
    deps.forwarding,
  );
}

// ---- book -----------------------------------------------------------------------------------------------------

const FAILURE_STATUS: Record<ForwardFailureReason, number> = {
  timeout: 504,
  unreachable: 502,
  body_too_large: 413,
  body_incomplete: 400,
};

/**
 * What the seller's answer makes of the payment: an answer is relayed with the receipt and a pay-per-call is
 * spent; a failure (5xx, timeout, or a buyer's body that could not be forwarded) keeps it usable for a retry.
 */
async function book(deps: PaidCallDeps, call: Call, paid: Paid, result: ForwardResult): Promise<void> {
  const { claim, answerHeaders } = paid;
  if (result.kind === 'answered' && result.status < 500) {
    result.relay({ ...answerHeaders, [RECEIPT_HEADER]: claim.tx_hash });
    await deps.payments.markServed(claim);
    return;
  }
  const retryUntil = await deps.payments.markRetryable(claim);
  const retryHeaders: Record<string, string> = { ...answerHeaders, [RECEIPT_HEADER]: claim.tx_hash };
  if (retryUntil) retryHeaders['X-402-Retry-Until'] = retryUntil.toISOString();
  if (result.kind === 'answered') {
    result.relay(retryHeaders);
    return;
  }
  for (const [header, value] of Object.entries(retryHeaders)) call.res.setHeader(header, value);
  const buyerFault = result.reason === 'body_too_large' || result.reason === 'body_incomplete';
  sendJson(
    call.res,
    FAILURE_STATUS[result.reason],
    errorBody(call.requestId, buyerFault ? result.reason : 'upstream_failed', result.message, {
      txHash: claim.tx_hash,
      retryUntil: retryUntil?.toISOString() ?? null,
      retry: retryUntil
        ? 'present the same X-402-Payment header again for the same resource before retryUntil'
        : 'your subscription stays valid; call again',
    }),
  );
}

// ---- the route ------------------------------------------------------------------------------------------------

function errorBody(requestId: string, code: string, message: string, extra: Record<string, unknown> = {}) {
  return { error: { code, message, ...extra, requestId } };
}

const STARTED_AT = Symbol('startedAt');
type TimedResponse = ServerResponse & { [STARTED_AT]?: number };

/**
 * The paid call's handler on the bare node request, for every method of `${SKILLS_PREFIX}/<skill>/…`: CORS and the
 * preflight, the request id, the duration metric, and errors answered like every express route (errorResponse:
 * Postgres away or a bus service silent is a 503 with Retry-After, a rate limit a 429); the call itself is
 * `paidCall`.
 */
export function paidCallHandler(deps: PaidCallDeps): (req: IncomingMessage, res: ServerResponse) => void {
  const route = `${SKILLS_PREFIX}/:skill/*`;
  const duration = deps.metrics.httpDuration;
  // One listener function for every response (no per-request closure): the start time rides on the response.
  function recordDuration(this: TimedResponse) {
    duration.observe(
      { method: this.req?.method ?? '', route, status: String(this.statusCode) },
      (performance.now() - (this[STARTED_AT] ?? 0)) / 1000,
    );
  }
  const fail = (res: ServerResponse, requestId: string, error: unknown) => {
    const { status, body } = errorResponse(error, requestId, (err) =>
      deps.logger.error({ err, requestId }, 'paid skill call failed'),
    );
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (status === 503) res.setHeader('Retry-After', '1');
    sendJson(res, status, body);
  };
  return (req, res) => {
    const requestId = requestIdOf(req);
    const started = performance.now();
    res.setHeader('x-request-id', requestId);
    (res as TimedResponse)[STARTED_AT] = started;
    res.once('finish', recordDuration);
    if (req.method === 'OPTIONS') {
      // CORS preflight: browsers may pay from any origin (x402 and Paygate headers allowed).
      res.writeHead(204, SKILL_PREFLIGHT_HEADERS);
      res.end();
      return;
    }
    for (const name in SKILL_CORS_HEADERS)
      res.setHeader(name, SKILL_CORS_HEADERS[name as keyof typeof SKILL_CORS_HEADERS]);
    const url = parseSkillUrl(req.url ?? '/');
    if (!url) {
      sendJson(res, 404, errorBody(requestId, 'skill_not_found', 'no skill at this URL'));
      return;
    }
    const call: Call = {
      req,
      res,
      requestId,
      started,
      method: req.method ?? 'GET',
      url,
      clientIp: readClientAddress(req, deps.config.trustedProxies),
    };
    paidCall(deps, call).catch((error) => fail(res, requestId, error));
  };
}
