import { DEFAULT_HOLD_HOURS_BY_KIND, UsdcAmount } from '@paygate/contracts';
import {
  type AnyRoute,
  badRequest,
  defineRoute,
  errorBody,
  HttpError,
  type SharedRateLimiter,
} from '@paygate/http';
import { formatUsdc, parseUsdc } from '@paygate/money';
import {
  decodePaymentHeader,
  PaymentHeaderError,
  type PaymentKind,
  type PaymentProof,
} from '@paygate/protocol';
import type { SellerAuth } from '@paygate/seller-auth';
import { type Static, Type } from '@sinclair/typebox';
import type { Request, Response } from 'express';
import type { GatewayProxyConfig } from '../config';
import type { GatewayMetrics } from '../metrics';
import { isUnavailable } from '../payments/failures';
import type { PaymentService } from '../payments/service';
import type { PaymentClaim, Purchase } from '../payments/types';
import { limitCall } from '../rate-limit';
import type { SignInWithX } from '../x402/extensions/sign-in-with-x';

const SIGN_IN_VERIFY_PATH = '/api/verify/sign-in';

/**
 * The route's price, as money travels on the wire: a decimal string. A JSON number is refused by name rather than
 * read, since its digits are a float's by the time the body is parsed.
 */
const WirePrice = Type.String({
  pattern: UsdcAmount.pattern,
  maxLength: UsdcAmount.maxLength,
  'x-rule': {
    type: 'must be a decimal USDC amount as a JSON string, such as "0.05", not a number',
    pattern: UsdcAmount['x-rule'],
  },
  description: "The route's price in USDC, a decimal string with at most 6 decimals",
});

/** The price in micro-USDC; a 400 naming `price` when it is beyond what USDC amounts may be. */
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

interface SignInVerifyDeps {
  /** A seller's calls per minute, shared with POST /api/verify. */
  verifyLimiter: SharedRateLimiter;
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
type SignInBody = Static<typeof SignInRequest>;
type SignInHttpRequest = Request<Record<string, string>, unknown, SignInBody, Record<string, unknown>>;

/**
 * A refusal of either verify route: 503 with Retry-After when the chain or ledger did not answer (nothing was
 * decided), otherwise `valid: false` and why.
 */
function sendRefusal(
  req: Pick<Request, 'requestId'>,
  res: Response,
  failure: { reason: string; message: string; details?: Record<string, unknown> },
  unavailable: boolean,
): void {
  if (unavailable) {
    res.status(503).setHeader('Retry-After', '2');
    res.json(errorBody(new HttpError(503, failure.reason, failure.message), req.requestId));
    return;
  }
  res.json({ valid: false, reason: failure.reason, message: failure.message, ...(failure.details ?? {}) });
}

/** A seller's verifications per minute, whatever each names (both verify routes share the count). */
function limitSeller(
  deps: Pick<SignInVerifyDeps, 'verifyLimiter' | 'metrics'>,
  res: Response,
  sellerId: string,
): undefined | Promise<void> {
  return limitCall(
    deps.verifyLimiter,
    deps.metrics.rateLimited,
    res,
    `verify-seller:${sellerId}`,
    'verifications per minute per seller',
  );
}

/** What a seller sells through its middleware, as the payment service claims it (credited to the key's seller). */
function sellerPurchase(
  kind: PaymentKind,
  body: { resource: string; durationDays?: number },
  priceMicro: bigint,
  sellerId: string,
): Purchase {
  return {
    resource: body.resource,
    priceMicro,
    kind,
    durationDays: kind === 'subscription' ? (body.durationDays ?? null) : null,
    sellerId,
    skillId: null,
    skillName: null,
    endpointId: null,
    holdPeriodHours: DEFAULT_HOLD_HOURS_BY_KIND[kind],
    claimedVia: 'verify',
  };
}

/** The origin a message must name: http(s), no credentials, path, query or fragment. */
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

/**
 * POST /api/verify/sign-in: the seller middleware's subscription() asks whether a SIGN-IN-WITH-X header names a
 * subscriber of the API key's seller (a seller-wide subscription paid through POST /api/verify, in force, its
 * amount covering the price). The message must name the seller's origin; its nonce is spent here, once.
 */
function signInHandler(deps: SignInVerifyDeps) {
  return async (req: SignInHttpRequest, res: Response) => {
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
      deps.metrics.refused.inc({ reason: outcome.failure.reason });
      sendRefusal(req, res, outcome.failure, outcome.status === 503);
      return;
    }
    deps.metrics.accepted.inc({ mode: 'verify', fresh: 'false' });
    const answer = validAnswer(body, outcome.claim, false);
    res.json({ ...answer, payment: { ...answer.payment, signedIn: true } });
  };
}

function signInVerifyRoute(deps: SignInVerifyDeps, auth: SellerAuth): AnyRoute {
  return defineRoute({
    method: 'post',
    path: SIGN_IN_VERIFY_PATH,
    summary:
      "Find the subscription of a wallet that signed in (x402 sign-in-with-x) for the seller middleware's subscription()",
    auth: { scheme: 'apiKey', middleware: auth.middleware() },
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
    handler: signInHandler(deps),
  });
}

interface VerifyDeps extends SignInVerifyDeps {
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

/** The request's rules beyond its schema: a price USDC can carry, and a subscription's duration. */
function checkVerifyRequest(body: VerifyBody): bigint {
  const priceMicro = priceMicroOf(body.price);
  if (body.type === 'subscription' && body.durationDays === undefined) {
    throw badRequest(
      'durationDays',
      'is required when type is subscription',
      'durationDays is required for a subscription',
    );
  }
  return priceMicro;
}

/** The valid answer: the claimed payment as the seller middleware puts it on req.x402. */
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

/** POST /api/verify's handler: checks the request, decodes the proof, limits the caller, claims the payment. */
function verifyHandler(deps: VerifyDeps) {
  return async (req: VerifyHttpRequest, res: Response) => {
    const body = req.body;
    const priceMicro = checkVerifyRequest(body);
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
      deps.metrics.refused.inc({ reason: outcome.failure.reason });
      sendRefusal(req, res, outcome.failure, isUnavailable(outcome.failure));
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
