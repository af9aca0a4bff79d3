import type { RelayerStatusReply } from '@paygate/contracts';
import {
  type AnyRoute,
  defineRoute,
  errorBody,
  rateLimitMiddleware,
  type SharedRateLimiter,
} from '@paygate/http';
import { caip2, v1NetworkOf } from '@paygate/protocol';
import type { SellerAuth } from '@paygate/seller-auth';
import { Type } from '@sinclair/typebox';
import type { Response } from 'express';
import type { GatewayProxyConfig } from '../../config';
import type { PaymentService } from '../../payments/service';
import { sellerSale } from '../../payments/types';
import { requestFingerprint } from '../extensions/payment-identifier';
import type { X402Outcome, X402Payments } from '../mechanisms/exact-evm/payments';
import { refusalError } from '../server/challenge';
import type { SettlementCopies } from '../server/copies';
import { checkFacilitatorRequest, FacilitatorRequest, SettleResponse, VerifyResponse } from './requirements';

const X402_PREFIX = '/api/v1/x402';

const RATE_LIMITED = 'rate_limited: more than X402_FACILITATOR_PER_MINUTE calls this minute (Retry-After)';
const UNAVAILABLE =
  'chain_unavailable, relayer_unavailable, settlement_in_progress or claim_unavailable: nothing was refused, present the same payment again (Retry-After)';

/** libs/http's envelope beside the x402 fields, which @x402/core's client needs on a non-2xx to raise its error. */
function sendRefusal(
  res: Response,
  requestId: string,
  refusal: { status: number; reason: string; message: string; retryAfterSeconds?: number },
  x402Fields: Record<string, unknown>,
): void {
  const envelope = errorBody(refusalError(res, refusal), requestId);
  res.status(refusal.status).json({ ...x402Fields, ...envelope });
}

function serverTiming(started: number, phases: Record<string, number> = {}): string {
  const parts = Object.entries(phases).map(([name, ms]) => `${name};dur=${ms.toFixed(2)}`);
  parts.push(`total;dur=${(performance.now() - started).toFixed(2)}`);
  return parts.join(', ');
}

type SellerGuard = Required<Pick<Parameters<typeof defineRoute>[0], 'auth' | 'before'>>;

interface FacilitatorDeps {
  config: GatewayProxyConfig;
  sellerAuth: SellerAuth;
  limiter: SharedRateLimiter;
  x402: Pick<X402Payments, 'verify' | 'relayer'>;
  payments: Pick<PaymentService, 'rows'>;
  copies: SettlementCopies;
}

/** Paygate as a facilitator for sellers' x402 servers (escrow only); refusing a payment is x402's 200. */
export function x402Routes(deps: FacilitatorDeps): AnyRoute[] {
  const guard: SellerGuard = {
    auth: { scheme: 'apiKey', middleware: deps.sellerAuth.middleware() },
    before: [
      rateLimitMiddleware(
        deps.limiter,
        (req) => `facilitator:${req.seller!.sellerId}`,
        'facilitator calls per minute per seller key',
      ),
    ],
  };
  return [supportedRoute(deps, guard), verifyRoute(deps, guard), settleRoute(deps, guard)];
}

function supportedRoute(deps: FacilitatorDeps, guard: SellerGuard): AnyRoute {
  const { config } = deps;
  return defineRoute({
    method: 'get',
    path: `${X402_PREFIX}/supported`,
    summary: 'What this facilitator settles (x402 SupportedResponse)',
    ...guard,
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
        signers: { 'eip155:*': signersOf(status) },
      });
    },
  });
}

function signersOf(status: RelayerStatusReply): string[] {
  if (status.signers && status.signers.length > 0) return status.signers.map((signer) => signer.address);
  return status.address ? [status.address] : [];
}

function verifyRoute(deps: FacilitatorDeps, guard: SellerGuard): AnyRoute {
  const { config } = deps;
  return defineRoute({
    method: 'post',
    path: `${X402_PREFIX}/verify`,
    summary: 'Verify an x402 payment into escrow without settling it (x402 VerifyRequest → VerifyResponse)',
    ...guard,
    body: FacilitatorRequest,
    responses: { '200': VerifyResponse },
    errors: { '429': RATE_LIMITED, '503': `${UNAVAILABLE}; the body is also a VerifyResponse` },
    handler: async (req, res) => {
      const started = performance.now();
      const checked = checkFacilitatorRequest(config, req.body);
      if (!checked.ok) {
        res.setHeader('Server-Timing', serverTiming(started));
        res.json(invalid(checked, checked.payer));
        return;
      }
      const refusal = await deps.x402.verify(checked.payment, checked.priceMicro, {
        verifyOnly: true,
        maxTimeoutSeconds: checked.maxTimeoutSeconds,
      });
      const payer = checked.payment.authorization.from;
      res.setHeader('Server-Timing', serverTiming(started, { verify: performance.now() - started }));
      if (refusal?.status === 503) sendRefusal(res, req.requestId, refusal, invalid(refusal, payer));
      else if (refusal) res.json(invalid(refusal, payer));
      else res.json({ isValid: true, payer });
    },
  });
}

function invalid(refusal: { reason: string; message: string }, payer: string | undefined) {
  return { isValid: false, invalidReason: refusal.reason, invalidMessage: refusal.message, payer };
}

/** One authorization is answered `success: true` once; its copies, on any replica, are refused as used. */
function settleRoute(deps: FacilitatorDeps, guard: SellerGuard): AnyRoute {
  const { config } = deps;
  return defineRoute({
    method: 'post',
    path: `${X402_PREFIX}/settle`,
    summary:
      "Settle an x402 payment into escrow, credited to the key's seller (x402 SettleRequest → SettleResponse)",
    ...guard,
    body: FacilitatorRequest,
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
        sendSettleResponse(res, { ...checked, status: 402 }, checked.payer, network, req.requestId);
        return;
      }
      const { payment, priceMicro, resourceUrl, maxTimeoutSeconds } = checked;
      const sellerId = req.seller!.sellerId;
      const purchase = sellerSale({
        resource: `x402 ${resourceUrl}`,
        priceMicro,
        kind: 'payPerCall',
        durationDays: null,
        sellerId,
        holdPeriodHours: 0,
        claimedVia: 'facilitator',
      });
      const fingerprint = payment.paymentId
        ? requestFingerprint(['facilitator', sellerId, resourceUrl, priceMicro.toString()])
        : undefined;
      const version = req.body.x402Version;
      const outcome = await deps.copies.settle(payment, purchase, version, {
        maxTimeoutSeconds,
        fingerprint,
      });
      // The seller's server serves on this answer: a claim answered again is spent now, never reopened once more.
      if (outcome.ok && !outcome.fresh) await deps.payments.rows.markServed(outcome.claim);
      res.setHeader('Server-Timing', serverTiming(started, phasesOf(outcome)));
      sendSettleResponse(res, outcome, payment.authorization.from, network, req.requestId);
    },
  });
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

function sendSettleResponse(
  res: Response,
  outcome: X402Outcome,
  payer: string | undefined,
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
    // settlement_pending names the transaction: @x402/core's resource server asks once more instead of paying again.
    transaction: outcome.transaction ?? '',
    network,
  };
  if (outcome.status === 409 || outcome.status === 429 || outcome.status === 503) {
    sendRefusal(res, requestId, outcome, answer);
    return;
  }
  res.json(answer);
}
