import type { RelayerStatusReply } from '@paygate/contracts';
import {
  type AnyRoute,
  defineRoute,
  errorBody,
  HttpError,
  rateLimitMiddleware,
  type SharedRateLimiter,
} from '@paygate/http';
import { caip2, v1NetworkOf } from '@paygate/protocol';
import type { SellerAuth } from '@paygate/seller-auth';
import { Type } from '@sinclair/typebox';
import type { RequestHandler, Response } from 'express';
import type { GatewayProxyConfig } from '../../config';
import type { PaymentService, Purchase } from '../../payments/service';
import { type DiscoveryDeps, discoveryRoute } from '../extensions/bazaar-discovery';
import { requestFingerprint } from '../extensions/payment-identifier';
import type { X402Outcome, X402Payments } from '../mechanisms/exact-evm/payments';
import type { SettlementCopies } from '../server/copies';
import {
  type CheckedRequest,
  checkFacilitatorRequest,
  FacilitatorRequest,
  SettleResponse,
  VerifyResponse,
} from './requirements';

export const X402_PREFIX = '/api/v1/x402';

const RATE_LIMITED = 'rate_limited: more than X402_FACILITATOR_PER_MINUTE calls this minute (Retry-After)';
const UNAVAILABLE =
  'chain_unavailable, relayer_unavailable, settlement_in_progress or claim_unavailable: nothing was refused, present the same payment again (Retry-After)';

/**
 * A non-2xx verify or settle answer: libs/http's error envelope (`error.code` is the x402 reason) beside the x402
 * response's own fields, which @x402/core's HTTPFacilitatorClient needs on a non-2xx to raise its VerifyError or
 * SettleError (it looks for `isValid` or `success`) instead of a bare "facilitator failed". A 429 or 503 says
 * when to present the payment again (Retry-After; a 503's nothing was refused, so 2 s).
 */
function sendRefusal(
  res: Response,
  requestId: string,
  refusal: { status: number; reason: string; message: string; retryAfterSeconds?: number },
  x402Fields: Record<string, unknown>,
): void {
  const retryAfterSeconds =
    refusal.status === 429 ? (refusal.retryAfterSeconds ?? 60) : refusal.status === 503 ? 2 : undefined;
  if (retryAfterSeconds !== undefined) res.setHeader('Retry-After', String(retryAfterSeconds));
  const details = refusal.status === 429 ? { retryAfterSeconds } : {};
  const envelope = errorBody(
    new HttpError(refusal.status, refusal.reason, refusal.message, details),
    requestId,
  );
  res.status(refusal.status).json({ ...x402Fields, ...envelope });
}

/** `Server-Timing` of a facilitator answer: each named phase and the whole handler (`total`), in ms. */
function serverTiming(started: number, phases: Record<string, number> = {}): string {
  const parts = Object.entries(phases).map(([name, ms]) => `${name};dur=${ms.toFixed(2)}`);
  parts.push(`total;dur=${(performance.now() - started).toFixed(2)}`);
  return parts.join(', ');
}

/** Every facilitator route: the seller's `sk_` key, then its calls per minute. */
interface SellerGuard {
  auth: { scheme: string; middleware: RequestHandler };
  before: RequestHandler[];
}

export interface FacilitatorDeps {
  config: GatewayProxyConfig;
  sellerAuth: SellerAuth;
  /** Per seller key per minute. */
  limiter: SharedRateLimiter;
  x402: Pick<X402Payments, 'verify' | 'relayer'>;
  payments: Pick<PaymentService, 'rows'>;
  copies: SettlementCopies;
  discovery: DiscoveryDeps;
}

/**
 * Paygate as an x402 facilitator for sellers running their own x402 server (for example `@x402/express` with
 * `HTTPFacilitatorClient`): verify and settle in the standard's shapes, authenticated by the seller's `sk_` key,
 * for payments into Paygate's escrow only; a settled payment is credited to the key's seller, like any payment.
 * Also the public x402 Bazaar discovery list of every active Paygate skill endpoint.
 *
 * A refusal of a payment is x402's 200 (`isValid: false`, `success: false`); every non-2xx answer is libs/http's
 * envelope `{ error: { code, message, requestId, … } }`, and a verify or settle one also keeps the x402 response's
 * fields beside it (sendRefusal), since @x402/core's client reads those on a non-2xx.
 */
export function x402Routes(deps: FacilitatorDeps): AnyRoute[] {
  const auth = deps.sellerAuth;
  const guard: SellerGuard = {
    auth: { scheme: 'apiKey', middleware: auth.middleware() },
    // Counted per seller key (after authentication): verify and settle are what an x402 server calls per sale.
    before: [
      rateLimitMiddleware(
        deps.limiter,
        (req) => `facilitator:${req.seller!.sellerId}`,
        'facilitator calls per minute per seller key',
      ),
    ],
  };
  return [
    supportedRoute(deps, guard),
    verifyRoute(deps, guard),
    settleRoute(deps, guard),
    discoveryRoute(deps.discovery, X402_PREFIX),
  ];
}

/** What this facilitator settles: exact on this chain (v1 too on Base), and the relayer as signer. */
function supportedRoute(deps: FacilitatorDeps, guard: SellerGuard): AnyRoute {
  const { config } = deps;
  return defineRoute({
    method: 'get',
    path: `${X402_PREFIX}/supported`,
    summary: 'What this facilitator settles (x402 SupportedResponse)',
    auth: guard.auth,
    before: guard.before,
    errors: { '429': RATE_LIMITED },
    responses: {
      '200': Type.Object({
        kinds: Type.Array(Type.Unknown()),
        extensions: Type.Array(Type.String()),
        signers: Type.Unknown(),
      }),
    },
    handler: async (_req, res) => {
      const started = performance.now();
      const status = await deps.x402.relayer.currentStatus();
      const v1 = v1NetworkOf(config.chainId);
      res.setHeader('Server-Timing', serverTiming(started));
      res.json({
        kinds: [
          { x402Version: 2, scheme: 'exact', network: caip2(config.chainId) },
          ...(v1 ? [{ x402Version: 1, scheme: 'exact', network: v1 }] : []),
        ],
        extensions: ['bazaar'],
        // Every key of the relayer's pool: a settlement may come from any of them.
        signers: { 'eip155:*': signersOf(status) },
      });
    },
  });
}

/** The relayer's signing addresses (x402 v2 `signers`), its one `address` when it names no pool. */
function signersOf(status: RelayerStatusReply): string[] {
  if (status.signers && status.signers.length > 0) return status.signers.map((signer) => signer.address);
  return status.address ? [status.address] : [];
}

/** Every check short of submitting, including that the authorization was never used. */
function verifyRoute(deps: FacilitatorDeps, guard: SellerGuard): AnyRoute {
  const { config } = deps;
  return defineRoute({
    method: 'post',
    path: `${X402_PREFIX}/verify`,
    summary: 'Verify an x402 payment into escrow without settling it (x402 VerifyRequest → VerifyResponse)',
    auth: guard.auth,
    body: FacilitatorRequest,
    before: guard.before,
    responses: { '200': VerifyResponse },
    errors: { '429': RATE_LIMITED, '503': `${UNAVAILABLE}; the body is also a VerifyResponse` },
    handler: async (req, res) => {
      const started = performance.now();
      const checked = checkFacilitatorRequest(config, req.body);
      if (!checked.ok) {
        res.setHeader('Server-Timing', serverTiming(started));
        res.json({
          isValid: false,
          invalidReason: checked.reason,
          invalidMessage: checked.message,
          payer: checked.payer,
        });
        return;
      }
      const refusal = await deps.x402.verify(checked.payment, checked.priceMicro, {
        checkBalance: true,
        refuseUsed: true,
        maxTimeoutSeconds: checked.maxTimeoutSeconds,
      });
      const payer = checked.payment.authorization.from;
      res.setHeader('Server-Timing', serverTiming(started, { verify: performance.now() - started }));
      if (refusal) {
        const answer = {
          isValid: false,
          invalidReason: refusal.reason,
          invalidMessage: refusal.message,
          payer,
        };
        if (refusal.status === 503) sendRefusal(res, req.requestId, refusal, answer);
        else res.json(answer);
        return;
      }
      res.json({ isValid: true, payer });
    },
  });
}

/**
 * Settles into escrow: one authorization is settled once and answered `success: true` once; its copies (concurrent
 * or later, on any replica) are refused as used (`invalid_exact_evm_nonce_already_used`).
 */
function settleRoute(deps: FacilitatorDeps, guard: SellerGuard): AnyRoute {
  const { config } = deps;
  return defineRoute({
    method: 'post',
    path: `${X402_PREFIX}/settle`,
    summary:
      "Settle an x402 payment into escrow, credited to the key's seller (x402 SettleRequest → SettleResponse)",
    auth: guard.auth,
    body: FacilitatorRequest,
    before: guard.before,
    responses: { '200': SettleResponse },
    errors: {
      '409':
        'payment_identifier_conflict (the same payment identifier for another request) or payment_identifier_served (its purchase was served already); the body is also a SettleResponse',
      '429':
        'rate_limited (more than X402_FACILITATOR_PER_MINUTE calls this minute) or relayer_daily_limit (the payer or the seller used its relayed payments of the UTC day; the body is also a SettleResponse): Retry-After says when',
      '503': `${UNAVAILABLE}; the body is also a SettleResponse`,
    },
    handler: async (req, res) => {
      const started = performance.now();
      const network =
        req.body.x402Version === 2
          ? caip2(config.chainId)
          : (v1NetworkOf(config.chainId) ?? caip2(config.chainId));
      const checked = checkFacilitatorRequest(config, req.body);
      if (!checked.ok) {
        res.setHeader('Server-Timing', serverTiming(started));
        res.json({
          success: false,
          errorReason: checked.reason,
          errorMessage: checked.message,
          payer: checked.payer,
          transaction: '',
          network,
        });
        return;
      }
      const outcome = await deps.copies.settle(
        checked.payment,
        facilitatorPurchase(checked, req.seller!.sellerId),
        req.body.x402Version,
        {
          maxTimeoutSeconds: checked.maxTimeoutSeconds,
          // The seller's request, as the facilitator sees it: its resource and what it asks to be paid.
          fingerprint: checked.payment.paymentId
            ? requestFingerprint([
                'facilitator',
                req.seller!.sellerId,
                checked.resourceUrl,
                checked.priceMicro.toString(),
              ])
            : undefined,
        },
      );
      // The seller's server serves on this answer, so the sale is spent now: a claim answered again (one the
      // recovery pass settled after its caller gave up, reopened for this retry) is never reopened once more.
      if (outcome.ok && !outcome.fresh) await deps.payments.rows.markServed(outcome.claim);
      res.setHeader('Server-Timing', serverTiming(started, phasesOf(outcome)));
      sendSettleResponse(res, outcome, checked.payment.authorization.from, network, req.requestId);
    },
  });
}

/** What a facilitator payment buys: one call of the seller's resource, credited to the key's seller. */
function facilitatorPurchase(checked: Extract<CheckedRequest, { ok: true }>, sellerId: string): Purchase {
  return {
    resource: `x402 ${checked.resourceUrl}`,
    priceMicro: checked.priceMicro,
    kind: 'payPerCall',
    durationDays: null,
    sellerId,
    skillId: null,
    skillName: null,
    endpointId: null,
    holdPeriodHours: 0,
    claimedVia: 'facilitator',
  };
}

const phasesOf = (outcome: X402Outcome): Record<string, number> =>
  outcome.ok
    ? {
        verify: outcome.timings.verificationMs,
        simulate: outcome.timings.simulationMs,
        submit: outcome.timings.submissionMs,
        include: outcome.timings.inclusionMs,
        ...(outcome.timings.claimMs === undefined ? {} : { claim: outcome.timings.claimMs }),
      }
    : {};

/** x402's SettleResponse; a 409, 429 or 503 is also libs/http's error envelope (sendRefusal). */
function sendSettleResponse(
  res: Response,
  outcome: X402Outcome,
  payer: string,
  network: string,
  requestId: string,
): void {
  if (outcome.ok) {
    res.json({ success: true, payer, transaction: outcome.txHash, network });
    return;
  }
  const answer = {
    success: false,
    errorReason: outcome.reason,
    errorMessage: outcome.message,
    payer,
    // settlement_pending names the transaction sent: @x402/core's resource server then asks once more with the
    // same payload, which waits for that transaction here instead of paying again.
    transaction: outcome.transaction ?? '',
    network,
  };
  if (outcome.status === 409 || outcome.status === 429 || outcome.status === 503) {
    sendRefusal(res, requestId, outcome, answer);
    return;
  }
  res.json(answer);
}
