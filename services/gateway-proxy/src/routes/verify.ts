import { DEFAULT_HOLD_HOURS_BY_KIND, UsdcAmount } from '@paygate/contracts';
import { type AnyRoute, defineRoute } from '@paygate/http';
import { formatUsdc, parseUsdc } from '@paygate/money';
import { decodePaymentHeader, PaymentHeaderError, type PaymentProof } from '@paygate/protocol';
import { SellerAuth } from '@paygate/seller-auth';
import { Type } from '@sinclair/typebox';
import { isUnavailable } from '../payments/failures';
import { limitCall } from '../rate-limit';
import type { GatewayState } from '../state';

export const VerifyRequest = Type.Object(
  {
    payment: Type.String({
      minLength: 1,
      maxLength: 4096,
      description: 'The X-402-Payment (or Payment) header value',
    }),
    price: Type.Union([UsdcAmount, Type.Number({ exclusiveMinimum: 0 })]),
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

/**
 * POST /api/verify: the seller middleware's verification, authenticated with the seller's API key.
 * GET /api/verify: the public payment parameters the middleware puts in its 402 bodies.
 */
export function verifyRoutes(state: GatewayState): AnyRoute[] {
  const auth = new SellerAuth(state.ctx.bus);
  return [
    defineRoute({
      method: 'get',
      path: '/api/verify',
      summary:
        'Payment parameters (network, chainId, payTo, asset, confirmations, issuer, jwksUrl) for 402 bodies',
      responses: { '200': PaymentParameters },
      handler: (_req, res) => {
        res.setHeader('Cache-Control', 'public, max-age=300');
        res.json({
          network: state.config.network,
          chainId: state.config.chainId,
          payTo: state.config.escrowAddress,
          asset: state.config.usdcAddress,
          confirmations: state.config.confirmations,
          issuer: state.config.publicBaseUrl,
          jwksUrl: `${state.config.publicBaseUrl}/.well-known/jwks.json`,
        });
      },
    }),
    defineRoute({
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
      handler: async (req, res) => {
        const body = req.body;
        let priceMicro: bigint;
        try {
          priceMicro = parseUsdc(body.price);
        } catch (error) {
          res.status(400).json({
            error: {
              code: 'invalid_request',
              message: `price ${(error as Error).message}`,
              field: 'price',
              rule: 'must be a decimal USDC amount with at most 6 decimals',
              requestId: req.requestId,
            },
          });
          return;
        }
        if (body.type === 'subscription' && body.durationDays === undefined) {
          res.status(400).json({
            error: {
              code: 'invalid_request',
              message: 'durationDays is required for a subscription',
              field: 'durationDays',
              rule: 'is required when type is subscription',
              requestId: req.requestId,
            },
          });
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
        const bucket = `verify:${seller.sellerId}:${proof.from.toLowerCase()}`;
        await limitCall(state.limiter, state.metrics.rateLimited, res, bucket);
        const outcome = await state.payments.present(proof, {
          resource: body.resource,
          priceMicro,
          kind: body.type,
          durationDays: body.type === 'subscription' ? (body.durationDays ?? null) : null,
          sellerId: seller.sellerId,
          skillId: null,
          skillName: null,
          endpointId: null,
          holdPeriodHours: DEFAULT_HOLD_HOURS_BY_KIND[body.type],
          claimedVia: 'verify',
        });
        if (!outcome.ok) {
          state.metrics.refused.inc({ reason: outcome.failure.reason });
          if (isUnavailable(outcome.failure)) {
            res.status(503).setHeader('Retry-After', '2');
            res.json({
              error: {
                code: outcome.failure.reason,
                message: outcome.failure.message,
                requestId: req.requestId,
              },
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
        state.metrics.accepted.inc({ mode: 'verify', fresh: String(outcome.fresh) });
        const claim = outcome.claim;
        res.json({
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
            reused: !outcome.fresh,
          },
        });
      },
    }),
  ];
}
