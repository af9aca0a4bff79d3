import { DEFAULT_HOLD_HOURS_BY_KIND } from '@paygate/contracts';
import { type AnyRoute, defineRoute, type SharedRateLimiter } from '@paygate/http';
import { formatUsdc, parseUsdc } from '@paygate/money';
import { decodePaymentHeader, PaymentHeaderError, type PaymentProof } from '@paygate/protocol';
import type { SellerAuth } from '@paygate/seller-auth';
import { type Static, Type } from '@sinclair/typebox';
import type { Request, Response } from 'express';
import type { GatewayProxyConfig } from '../config';
import type { GatewayMetrics } from '../metrics';
import { isUnavailable, type PaymentFailure } from '../payments/failures';
import type { PaymentService } from '../payments/service';
import type { PaymentClaim, Purchase } from '../payments/types';
import { limitCall } from '../rate-limit';
import { type SignInVerifyDeps, signInVerifyRoute, WirePrice } from './verify-sign-in';

export interface VerifyDeps extends SignInVerifyDeps {
  config: GatewayProxyConfig;
  sellerAuth: SellerAuth;
  /** Per seller and `from` per minute (RATE_LIMIT_PER_MINUTE). */
  limiter: SharedRateLimiter;
  payments: Pick<PaymentService, 'present'>;
  metrics: Pick<GatewayMetrics, 'accepted' | 'refused' | 'rateLimited'>;
}

export const VerifyRequest = Type.Object(
  {
    payment: Type.String({
      minLength: 1,
      maxLength: 4096,
      description: 'The X-402-Payment (or Payment) header value',
    }),
    price: WirePrice,
    type: Type.Union([
      Type.Literal('payPerCall'),
      Type.Literal('subscription'),
      Type.Literal('product'),
      Type.Literal('service'),
    ]),
    durationDays: Type.Optional(Type.Integer({ minimum: 1, maximum: 3650 })),
    requiresShipping: Type.Optional(Type.Boolean()),
    resource: Type.String({
      minLength: 1,
      maxLength: 2048,
      description: '"<METHOD> <url or path>" the agent signed',
    }),
  },
  { additionalProperties: false },
);

const PaymentParameters = Type.Object(
  {
    network: Type.String(),
    chainId: Type.Integer(),
    payTo: Type.String({ description: 'escrow wallet' }),
    asset: Type.String({ description: 'USDC contract' }),
    confirmations: Type.Integer(),
    issuer: Type.String(),
    jwksUrl: Type.String(),
  },
  { description: 'payment parameters for 402 bodies' },
);

const VerifyAnswer = Type.Union(
  [
    Type.Object({
      valid: Type.Literal(true),
      payment: Type.Object(
        {
          txHash: Type.String(),
          amount: Type.String(),
          payer: Type.String(),
          network: Type.String(),
          type: Type.String(),
          durationDays: Type.Optional(Type.Integer()),
          expiresAt: Type.Optional(Type.String({ format: 'date-time' })),
          requiresShipping: Type.Optional(Type.Boolean()),
          reused: Type.Boolean(),
        },
        { description: 'becomes req.x402' },
      ),
    }),
    Type.Object({
      valid: Type.Literal(false),
      reason: Type.String({ description: 'malformed_payment or a PaymentRefused reason' }),
      message: Type.String(),
    }),
  ],
  { description: 'valid or invalid' },
);

type VerifyBody = Static<typeof VerifyRequest>;
/** The request as defineRoute hands it to the handler (its body already validated). */
type VerifyHttpRequest = Request<Record<string, string>, unknown, VerifyBody, Record<string, unknown>>;
/** A 400 answer's field, rule and message (the body of every invalid request of the route). */
type InvalidRequest = { message: string; field: string; rule: string };

/** The request's rules beyond its schema: a decimal USDC price, and a subscription's duration. */
function checkVerifyRequest(body: VerifyBody): { priceMicro: bigint } | { invalid: InvalidRequest } {
  let priceMicro: bigint;
  try {
    priceMicro = parseUsdc(body.price);
  } catch (error) {
    return {
      invalid: {
        message: `price ${(error as Error).message}`,
        field: 'price',
        rule: 'must be a decimal USDC amount with at most 6 decimals',
      },
    };
  }
  if (body.type === 'subscription' && body.durationDays === undefined) {
    return {
      invalid: {
        message: 'durationDays is required for a subscription',
        field: 'durationDays',
        rule: 'is required when type is subscription',
      },
    };
  }
  return { priceMicro };
}

function sendInvalidRequest(req: Pick<Request, 'requestId'>, res: Response, invalid: InvalidRequest): void {
  res.status(400).json({
    error: {
      code: 'invalid_request',
      message: invalid.message,
      field: invalid.field,
      rule: invalid.rule,
      requestId: req.requestId,
    },
  });
}

/** What the seller sells, as the payment service is asked to claim it (credited to the API key's seller). */
function purchaseOf(body: VerifyBody, priceMicro: bigint, sellerId: string): Purchase {
  return {
    resource: body.resource,
    priceMicro,
    kind: body.type,
    durationDays: body.type === 'subscription' ? (body.durationDays ?? null) : null,
    sellerId,
    skillId: null,
    skillName: null,
    endpointId: null,
    holdPeriodHours: DEFAULT_HOLD_HOURS_BY_KIND[body.type],
    claimedVia: 'verify',
  };
}

/** A refusal: 503 with Retry-After when the chain or ledger did not answer, otherwise `valid: false` and why. */
function sendRefusal(req: Pick<Request, 'requestId'>, res: Response, failure: PaymentFailure): void {
  if (isUnavailable(failure)) {
    res.status(503).setHeader('Retry-After', '2');
    res.json({ error: { code: failure.reason, message: failure.message, requestId: req.requestId } });
    return;
  }
  res.json({ valid: false, reason: failure.reason, message: failure.message, ...(failure.details ?? {}) });
}

/** The valid answer: the claimed payment as the seller middleware puts it on req.x402. */
function validAnswer(body: VerifyBody, claim: PaymentClaim, fresh: boolean) {
  return {
    valid: true,
    payment: {
      txHash: claim.tx_hash,
      amount: formatUsdc(claim.amount_micro),
      payer: claim.payer,
      network: claim.network,
      type: claim.kind,
      ...(claim.kind === 'subscription'
        ? { durationDays: body.durationDays, expiresAt: claim.access_expires_at?.toISOString() }
        : {}),
      ...(claim.kind === 'product' ? { requiresShipping: body.requiresShipping ?? false } : {}),
      reused: !fresh,
    },
  };
}

/** POST /api/verify's handler: checks the request, decodes the proof, limits the caller, claims the payment. */
function verifyHandler(deps: VerifyDeps) {
  return async (req: VerifyHttpRequest, res: Response) => {
    const body = req.body;
    const checked = checkVerifyRequest(body);
    if ('invalid' in checked) {
      sendInvalidRequest(req, res, checked.invalid);
      return;
    }
    let proof: PaymentProof;
    try {
      proof = decodePaymentHeader(body.payment);
    } catch (error) {
      const e = error as PaymentHeaderError;
      res.json({
        valid: false,
        reason: 'malformed_payment',
        message: e.message,
        field: e instanceof PaymentHeaderError ? e.field : 'payment',
      });
      return;
    }
    const seller = req.seller!;
    // The seller's own bound first: `from` is the caller's word, so rotating it would pass the per-wallet one.
    await limitCall(
      deps.verifyLimiter,
      deps.metrics.rateLimited,
      res,
      `verify-seller:${seller.sellerId}`,
      'verifications per minute per seller',
    );
    const bucket = `verify:${seller.sellerId}:${proof.from.toLowerCase()}`;
    await limitCall(deps.limiter, deps.metrics.rateLimited, res, bucket);
    const outcome = await deps.payments.present(proof, purchaseOf(body, checked.priceMicro, seller.sellerId));
    if (!outcome.ok) {
      deps.metrics.refused.inc({ reason: outcome.failure.reason });
      sendRefusal(req, res, outcome.failure);
      return;
    }
    deps.metrics.accepted.inc({ mode: 'verify', fresh: String(outcome.fresh) });
    res.json(validAnswer(body, outcome.claim, outcome.fresh));
  };
}

/**
 * POST /api/verify: the seller middleware's verification, authenticated with the seller's API key.
 * GET /api/verify: the public payment parameters the middleware puts in its 402 bodies.
 */
export function verifyRoutes(deps: VerifyDeps): AnyRoute[] {
  const auth = deps.sellerAuth;
  return [paymentParametersRoute(deps), verifyPaymentRoute(deps, auth), signInVerifyRoute(deps, auth)];
}

function paymentParametersRoute(deps: VerifyDeps) {
  return defineRoute({
    method: 'get',
    path: '/api/verify',
    summary:
      'Payment parameters (network, chainId, payTo, asset, confirmations, issuer, jwksUrl) for 402 bodies',
    responses: { '200': PaymentParameters },
    handler: (_req, res) => {
      res.setHeader('Cache-Control', 'public, max-age=300');
      res.json({
        network: deps.config.network,
        chainId: deps.config.chainId,
        payTo: deps.config.escrowAddress,
        asset: deps.config.usdcAddress,
        confirmations: deps.config.confirmations,
        issuer: deps.config.publicBaseUrl,
        jwksUrl: `${deps.config.publicBaseUrl}/.well-known/jwks.json`,
      });
    },
  });
}

function verifyPaymentRoute(deps: VerifyDeps, auth: SellerAuth) {
  return defineRoute({
    method: 'post',
    path: '/api/verify',
    summary:
      "Verify a payment for the seller middleware; a valid payment is credited to the API key's seller",
    auth: { scheme: 'apiKey', middleware: auth.middleware() },
    body: VerifyRequest,
    bodyExamples: {
      payPerCall: {
        payment: '<X-402-Payment value>',
        price: '0.05',
        type: 'payPerCall',
        resource: 'GET https://api.seller.example/weather',
      },
    },
    responses: { '200': VerifyAnswer },
    errors: {
      '429': 'rate limited',
      '503': 'chain, key registry or ledger (claim_unavailable) unavailable; nothing was claimed; retry',
    },
    handler: verifyHandler(deps),
  });
}
