import { DEFAULT_HOLD_HOURS_BY_KIND, UsdcAmount } from '@paygate/contracts';
import { type AnyRoute, defineRoute, type SharedRateLimiter } from '@paygate/http';
import { formatUsdc, parseUsdc } from '@paygate/money';
import type { SellerAuth } from '@paygate/seller-auth';
import { type Static, Type } from '@sinclair/typebox';
import type { Request, Response } from 'express';
import type { GatewayMetrics } from '../metrics';
import type { Purchase } from '../payments/types';
import { limitCall } from '../rate-limit';
import type { SignInWithX } from '../x402/extensions/sign-in-with-x';

export const SIGN_IN_VERIFY_PATH = '/api/verify/sign-in';

/**
 * The route's price, as money travels on the wire: a decimal string. A JSON number is refused by name rather than
 * read, since its digits are a float's by the time the body is parsed.
 */
export const WirePrice = Type.String({
  pattern: UsdcAmount.pattern,
  maxLength: UsdcAmount.maxLength,
  'x-rule': {
    type: 'must be a decimal USDC amount as a JSON string, such as "0.05", not a number',
    pattern: UsdcAmount['x-rule'],
  },
  description: "The route's price in USDC, a decimal string with at most 6 decimals",
});

export interface SignInVerifyDeps {
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

function invalid(
  req: Pick<Request, 'requestId'>,
  res: Response,
  field: string,
  rule: string,
  message: string,
) {
  res
    .status(400)
    .json({ error: { code: 'invalid_request', message, field, rule, requestId: req.requestId } });
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
    let priceMicro: bigint;
    try {
      priceMicro = parseUsdc(body.price);
    } catch (error) {
      invalid(
        req,
        res,
        'price',
        'must be a decimal USDC amount with at most 6 decimals',
        `price ${(error as Error).message}`,
      );
      return;
    }
    const origin = originOf(body.origin);
    if (!origin) {
      invalid(
        req,
        res,
        'origin',
        'must be an http(s) origin without path, query or credentials',
        'origin is not an origin',
      );
      return;
    }
    const seller = req.seller!;
    await limitCall(
      deps.verifyLimiter,
      deps.metrics.rateLimited,
      res,
      `verify-seller:${seller.sellerId}`,
      'verifications per minute per seller',
    );
    const purchase: Purchase = {
      resource: body.resource,
      priceMicro,
      kind: 'subscription',
      durationDays: body.durationDays,
      sellerId: seller.sellerId,
      skillId: null,
      skillName: null,
      endpointId: null,
      holdPeriodHours: DEFAULT_HOLD_HOURS_BY_KIND.subscription,
      claimedVia: 'verify',
    };
    const outcome = await deps.signIn.subscriptionFor(body.signIn, purchase, origin);
    if (!outcome.ok) {
      deps.metrics.refused.inc({ reason: outcome.failure.reason });
      if (outcome.status === 503) {
        res.status(503).setHeader('Retry-After', '2');
        res.json({
          error: { code: outcome.failure.reason, message: outcome.failure.message, requestId: req.requestId },
        });
        return;
      }
      res.json({
        valid: false,
        reason: outcome.failure.reason,
        message: outcome.failure.message,
        ...(outcome.failure.details ?? {}),
      });
      return;
    }
    deps.metrics.accepted.inc({ mode: 'verify', fresh: 'false' });
    const { claim } = outcome;
    res.json({
      valid: true,
      payment: {
        txHash: claim.tx_hash,
        amount: formatUsdc(claim.amount_micro),
        payer: claim.payer,
        network: claim.network,
        type: claim.kind,
        durationDays: body.durationDays,
        expiresAt: claim.access_expires_at?.toISOString(),
        reused: true,
        signedIn: true,
      },
    });
  };
}

export function signInVerifyRoute(deps: SignInVerifyDeps, auth: SellerAuth): AnyRoute {
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
