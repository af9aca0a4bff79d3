import { DEFAULT_HOLD_HOURS_BY_KIND, UsdcAmount } from '@paygate/contracts';
import { type AnyRoute, badRequest, defineRoute, errorBody, type SharedRateLimiter } from '@paygate/http';
import { formatUsdc, parseUsdc } from '@paygate/money';
import {
  decodePaymentHeader,
  PaymentHeaderError,
  type PaymentKind,
  type PaymentProof,
} from '@paygate/protocol';
import type { SellerAuth } from '@paygate/seller-auth';
import { Type } from '@sinclair/typebox';
import type { Request, Response } from 'express';
import type { GatewayProxyConfig } from '../config';
import type { GatewayMetrics } from '../metrics';
import { isUnavailable } from '../payments/failures';
import type { PaymentService } from '../payments/service';
import { type PaymentClaim, type Purchase, sellerSale } from '../payments/types';
import { limitCall } from '../rate-limit';
import type { SignInWithX } from '../x402/extensions/sign-in-with-x';
import { refusalError } from '../x402/server/challenge';
import { PaymentRequirementsBody } from '../x402/server/payment-required';

/** A decimal string: a JSON number's digits are a float's by the time the body is parsed. */
const WirePrice = Type.String({
  pattern: UsdcAmount.pattern,
  maxLength: UsdcAmount.maxLength,
  'x-rule': {
    type: 'must be a decimal USDC amount as a JSON string, such as "0.05", not a number',
    pattern: UsdcAmount['x-rule'],
  },
  description: "The route's price in USDC, a decimal string with at most 6 decimals",
});

function priceMicroOf(price: string): bigint {
  try {
    return parseUsdc(price);
  } catch (error) {
    throw badRequest(
      'price',
      'must be a decimal USDC amount with at most 6 decimals',
      `price ${(error as Error).message}`,
    );
  }
}

interface VerifyDeps {
  config: GatewayProxyConfig;
  sellerAuth: SellerAuth;
  limiter: SharedRateLimiter;
  verifyLimiter: SharedRateLimiter;
  payments: Pick<PaymentService, 'present'>;
  signIn: Pick<SignInWithX, 'subscriptionFor'>;
  metrics: Pick<GatewayMetrics, 'accepted' | 'refused' | 'rateLimited'>;
}

const SignInRequest = Type.Object(
  {
    signIn: Type.String({
      minLength: 1,
      maxLength: 8192,
      description:
        "The SIGN-IN-WITH-X header value (x402's sign-in-with-x: a wallet-signed message, base64 JSON)",
    }),
    origin: Type.String({
      minLength: 1,
      maxLength: 2048,
      description:
        "The seller's public origin the message must name (its domain and URI), e.g. https://api.seller.example",
    }),
    price: WirePrice,
    durationDays: Type.Integer({ minimum: 1, maximum: 3650 }),
    resource: Type.String({
      minLength: 1,
      maxLength: 2048,
      description: '"<METHOD> <url or path>" asked for',
    }),
  },
  { additionalProperties: false },
);

/** 503 with Retry-After when the chain or the ledger did not answer (nothing decided), else `valid: false` and why. */
function sendRefusal(
  deps: VerifyDeps,
  req: Pick<Request, 'requestId'>,
  res: Response,
  failure: { reason: string; message: string; details?: Record<string, unknown> },
  unavailable: boolean,
): void {
  deps.metrics.refused.inc({ reason: failure.reason });
  if (unavailable) {
    res.status(503).json(errorBody(refusalError(res, { ...failure, status: 503 }), req.requestId));
    return;
  }
  res.json({ valid: false, reason: failure.reason, message: failure.message, ...(failure.details ?? {}) });
}

function limitSeller(deps: VerifyDeps, res: Response, sellerId: string): undefined | Promise<void> {
  return limitCall(
    deps.verifyLimiter,
    deps.metrics.rateLimited,
    res,
    `verify-seller:${sellerId}`,
    'verifications per minute per seller',
  );
}

/** Credited to the API key's seller. */
function sellerPurchase(
  kind: PaymentKind,
  body: { resource: string; durationDays?: number },
  priceMicro: bigint,
  sellerId: string,
): Purchase {
  return sellerSale({
    resource: body.resource,
    priceMicro,
    kind,
    durationDays: kind === 'subscription' ? (body.durationDays ?? null) : null,
    sellerId,
    holdPeriodHours: DEFAULT_HOLD_HOURS_BY_KIND[kind],
    claimedVia: 'verify',
  });
}

function originOf(value: string): string | undefined {
  try {
    const url = new URL(value);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
    if (url.username || url.password || url.pathname !== '/' || url.search || url.hash) return undefined;
    return url.origin;
  } catch {
    return undefined;
  }
}

/** The seller middleware's subscription(): a seller-wide subscription of the signed-in wallet; its nonce is spent here. */
function signInVerifyRoute(deps: VerifyDeps): AnyRoute {
  return defineRoute({
    method: 'post',
    path: '/api/verify/sign-in',
    summary:
      "Find the subscription of a wallet that signed in (x402 sign-in-with-x) for the seller middleware's subscription()",
    auth: { scheme: 'apiKey', middleware: deps.sellerAuth.middleware() },
    body: SignInRequest,
    responses: {
      '200': Type.Union(
        [
          Type.Object({ valid: Type.Literal(true), payment: Type.Record(Type.String(), Type.Unknown()) }),
          Type.Object({ valid: Type.Literal(false), reason: Type.String(), message: Type.String() }),
        ],
        { description: 'valid (the subscription as req.x402) or invalid with the sign-in-with-x reason' },
      ),
    },
    errors: {
      '429': 'rate limited',
      '503': "the chain did not answer a contract wallet's signature check (siwx_unavailable); retry",
    },
    handler: async (req, res) => {
      const body = req.body;
      const priceMicro = priceMicroOf(body.price);
      const origin = originOf(body.origin);
      if (!origin) {
        throw badRequest(
          'origin',
          'must be an http(s) origin without path, query or credentials',
          'origin is not an origin',
        );
      }
      const seller = req.seller!;
      await limitSeller(deps, res, seller.sellerId);
      const purchase = sellerPurchase('subscription', body, priceMicro, seller.sellerId);
      const outcome = await deps.signIn.subscriptionFor(body.signIn, purchase, origin);
      if (!outcome.ok) {
        sendRefusal(deps, req, res, outcome.failure, outcome.status === 503);
        return;
      }
      deps.metrics.accepted.inc({ mode: 'verify', fresh: 'false' });
      const answer = validAnswer(body, outcome.claim, false);
      res.json({ ...answer, payment: { ...answer.payment, signedIn: true } });
    },
  });
}

export const VerifyRequest = Type.Object(
  {
    payment: Type.String({
      minLength: 1,
      maxLength: 4096,
      description: 'The X-402-Payment (or Payment) header value',
    }),
    price: WirePrice,
    type: PaymentRequirementsBody.properties.type,
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

/** The claimed payment as the seller middleware puts it on req.x402. */
function validAnswer(
  body: { durationDays?: number; requiresShipping?: boolean },
  claim: PaymentClaim,
  fresh: boolean,
) {
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

/** POST /api/verify (the seller middleware's, with its API key) and GET /api/verify (public payment parameters). */
export function verifyRoutes(deps: VerifyDeps): AnyRoute[] {
  return [paymentParametersRoute(deps), verifyPaymentRoute(deps), signInVerifyRoute(deps)];
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

function verifyPaymentRoute(deps: VerifyDeps) {
  return defineRoute({
    method: 'post',
    path: '/api/verify',
    summary:
      "Verify a payment for the seller middleware; a valid payment is credited to the API key's seller",
    auth: { scheme: 'apiKey', middleware: deps.sellerAuth.middleware() },
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
    handler: async (req, res) => {
      const body = req.body;
      const priceMicro = priceMicroOf(body.price);
      if (body.type === 'subscription' && body.durationDays === undefined) {
        throw badRequest(
          'durationDays',
          'is required when type is subscription',
          'durationDays is required for a subscription',
        );
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
      await limitSeller(deps, res, seller.sellerId);
      const bucket = `verify:${seller.sellerId}:${proof.from.toLowerCase()}`;
      await limitCall(deps.limiter, deps.metrics.rateLimited, res, bucket);
      const outcome = await deps.payments.present(
        proof,
        sellerPurchase(body.type, body, priceMicro, seller.sellerId),
      );
      if (!outcome.ok) {
        sendRefusal(deps, req, res, outcome.failure, isUnavailable(outcome.failure));
        return;
      }
      deps.metrics.accepted.inc({ mode: 'verify', fresh: String(outcome.fresh) });
      res.json(validAnswer(body, outcome.claim, outcome.fresh));
    },
  });
}
