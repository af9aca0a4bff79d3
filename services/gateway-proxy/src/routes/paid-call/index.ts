import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  type AnyRoute,
  defineRoute,
  errorResponse,
  HttpError,
  clientAddress as readClientAddress,
} from '@paygate/http';
import { Type } from '@sinclair/typebox';
import { requestIdOf, sendJson } from '../../http-util';
import { limitCall } from '../../rate-limit';
import { SKILL_CORS_HEADERS, SKILL_PREFLIGHT_HEADERS } from '../../x402/server/challenge';
import { PaymentRefusedBody, PaymentRequiredBody } from '../../x402/server/payment-required';
import { paymentHeaderDoc } from '../openapi';
import { refuseBlockedPayer } from './blocked';
import { book } from './book';
import { type Call, type PaidCallDeps, parseSkillUrl, SKILLS_PREFIX, sendError } from './call';
import { challenge, refuseUnreadable } from './challenge';
import { forward } from './forward';
import { findOffer } from './offer';
import { settleX402, verifyAndClaim } from './pay';
import { rateBucket, readProof } from './proof';
import { signIn } from './sign-in';

/** The paid call, one pipeline; each step answers the buyer itself when the call stops there. */
async function paidCall(deps: PaidCallDeps, call: Call): Promise<void> {
  // A step's promise is awaited only when it returned one: a subscriber's repeated call pays no promise per step.
  const finding = findOffer(deps, call);
  const offer = finding instanceof Promise ? await finding : finding;
  if (!offer) return;
  const proof = readProof(call);
  const limiting = limitCall(
    deps.limiter,
    deps.metrics.rateLimited,
    call.res,
    rateBucket(deps, offer, call, proof),
  );
  if (limiting) await limiting;
  if (refuseBlockedPayer(deps, offer, call, proof)) return;
  if (proof.kind === 'unreadable') return refuseUnreadable(deps, offer, call, proof);
  let paying: ReturnType<typeof verifyAndClaim>;
  if (proof.kind === 'none') {
    const signingIn = signIn(deps, offer, call);
    if (!signingIn) return challenge(deps, offer, call);
    paying = signingIn;
  } else {
    paying =
      proof.kind === 'x402' ? settleX402(deps, offer, call, proof) : verifyAndClaim(deps, offer, call, proof);
  }
  const paid = paying instanceof Promise ? await paying : paying;
  if (!paid) return;
  const answer = await forward(deps, offer, call, paid);
  if (!answer) return;
  const booking = book(deps, call, paid, answer);
  if (booking) await booking;
}

const STARTED_AT = Symbol('startedAt');
type TimedResponse = ServerResponse & { [STARTED_AT]?: number };

/** On the bare node request: CORS, the request id, the duration metric, and errors answered like express routes'. */
function paidCallHandler(deps: PaidCallDeps): (req: IncomingMessage, res: ServerResponse) => void {
  const route = `${SKILLS_PREFIX}/:skill/*`;
  const duration = deps.metrics.httpDuration;
  // One listener for every response (no per-request closure): the start time rides on the response.
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
      res.writeHead(204, SKILL_PREFLIGHT_HEADERS);
      res.end();
      return;
    }
    for (const name in SKILL_CORS_HEADERS)
      res.setHeader(name, SKILL_CORS_HEADERS[name as keyof typeof SKILL_CORS_HEADERS]);
    const url = parseSkillUrl(req.url ?? '/');
    if (!url) {
      sendError({ res, requestId }, new HttpError(404, 'skill_not_found', 'no skill at this URL'));
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

const paymentHeaders = [
  { name: 'X-402-Payment', description: paymentHeaderDoc },
  { name: 'Payment', description: 'fallback name of X-402-Payment' },
  {
    name: 'PAYMENT-SIGNATURE',
    description: 'x402 v2 payment: base64 JSON with an EIP-3009 authorization (docs/x402.md)',
  },
  { name: 'X-PAYMENT', description: 'x402 v1 payment (Base and Base Sepolia)' },
].map((header) => ({ ...header, in: 'header', required: false, schema: { type: 'string' } }));

/** Served on the bare request: express's stack cost a subscriber's repeated call a quarter of its throughput. */
export function paidCallRoute(deps: PaidCallDeps): AnyRoute {
  const handler = paidCallHandler(deps);
  return defineRoute({
    method: 'get',
    path: `${SKILLS_PREFIX}/:skillName/*path`,
    operationId: 'callPaidEndpoint',
    summary:
      "Call a paid endpoint (the method is the endpoint's configured one: GET, POST, PUT, PATCH or DELETE)",
    description:
      'HEAD is the validation ping: 200 with X-402-Price, nothing charged or forwarded (404 when there is no such endpoint). OPTIONS answers the CORS preflight for any origin.',
    params: Type.Object({
      skillName: Type.String(),
      path: Type.String({ description: 'the endpoint path' }),
    }),
    headers: paymentHeaders,
    responses: {
      '200': {
        description:
          "PROXY: the seller's answer, streamed, with X-402-Receipt: <txHash> (and PAYMENT-RESPONSE / X-PAYMENT-RESPONSE when paid with x402). TICKET: { ticket, header, expiresAt, url, method, txHash, payer } with X-402-Mode: TICKET; call url with X-402-Ticket: <ticket>.",
      },
      '402': {
        description:
          'no proof (PaymentRequirements; with x402 the PAYMENT-REQUIRED header) or a refused proof (PaymentRefused; x402 reason codes for x402 payments)',
        schema: Type.Union([PaymentRequiredBody, PaymentRefusedBody]),
      },
      '504': { description: 'the seller timed out; same retry rule as 502' },
    },
    errors: {
      '400': 'malformed payment header',
      '404': 'unknown or inactive skill, or unknown path',
      '405': 'wrong method (Allow header names the right one)',
      '429': 'over 60 requests per minute per wallet per skill; Retry-After says when',
      '502':
        'the seller failed; the payment stays usable for a retry of the same resource until retryUntil (X-402-Retry-Until)',
    },
    bare: {
      prefix: `${SKILLS_PREFIX}/`,
      handle: (req, res) => {
        handler(req, res);
        return true;
      },
    },
  });
}
