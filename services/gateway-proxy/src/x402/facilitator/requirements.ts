import { formatUsdc } from '@paygate/money';
import { caip2, v1NetworkOf, type X402HeaderError } from '@paygate/protocol';
import { Type } from '@sinclair/typebox';
import type { GatewayProxyConfig } from '../../config';
import { PAYGATE_REASONS, UPSTREAM_REASONS as R, type X402Reason } from '../../reasons';
import { type DecodedX402Payment, parseX402Payment } from '../protocol';

/** The requirements a seller's x402 server sends with a payment: v2 (`amount`) or v1 (`maxAmountRequired`). */
const Requirements = Type.Object({
  scheme: Type.String({ maxLength: 32 }),
  network: Type.String({ maxLength: 64 }),
  asset: Type.String({ maxLength: 128 }),
  payTo: Type.String({ maxLength: 128 }),
  amount: Type.Optional(Type.String({ pattern: '^[0-9]{1,30}$' })),
  maxAmountRequired: Type.Optional(Type.String({ pattern: '^[0-9]{1,30}$' })),
  resource: Type.Optional(Type.String({ maxLength: 2048 })),
  maxTimeoutSeconds: Type.Optional(Type.Integer({ minimum: 0 })),
  extra: Type.Optional(Type.Unknown()),
});

export const FacilitatorRequest = Type.Object({
  x402Version: Type.Union([Type.Literal(1), Type.Literal(2)]),
  paymentPayload: Type.Record(Type.String(), Type.Unknown()),
  paymentRequirements: Requirements,
});
export type FacilitatorRequest = typeof FacilitatorRequest.static;

export const VerifyResponse = Type.Object(
  {
    isValid: Type.Boolean(),
    invalidReason: Type.Optional(Type.String()),
    invalidMessage: Type.Optional(Type.String()),
    payer: Type.Optional(Type.String()),
  },
  { description: "x402's VerifyResponse" },
);
export const SettleResponse = Type.Object(
  {
    success: Type.Boolean(),
    errorReason: Type.Optional(Type.String()),
    errorMessage: Type.Optional(Type.String()),
    payer: Type.Optional(Type.String()),
    transaction: Type.String(),
    network: Type.String(),
  },
  { description: "x402's SettleResponse" },
);

type CheckedRequest =
  | {
      ok: true;
      payment: DecodedX402Payment;
      priceMicro: bigint;
      resourceUrl: string;
      /** The requirements' maxTimeoutSeconds, at most X402_FACILITATOR_MAX_TIMEOUT_SECONDS: bounds validBefore. */
      maxTimeoutSeconds: number;
    }
  | { ok: false; reason: X402Reason; message: string; payer?: string };

type Refusal = { reason: X402Reason; message: string } | undefined;

/** The seller's requirements must be Paygate's (`@x402/evm` itself verifies against any asset). */
function refuseRequirements(config: GatewayProxyConfig, body: FacilitatorRequest): Refusal {
  const r = body.paymentRequirements;
  const network = body.x402Version === 2 ? caip2(config.chainId) : v1NetworkOf(config.chainId);
  const amount = r.amount ?? r.maxAmountRequired;
  if (r.scheme !== 'exact') return { reason: R.scheme, message: 'Paygate settles the exact scheme' };
  if (r.network !== network) {
    return { reason: R.networkMismatch, message: `Paygate settles on ${network ?? caip2(config.chainId)}` };
  }
  if (r.asset.toLowerCase() !== config.usdcAddress.toLowerCase()) {
    return {
      reason: PAYGATE_REASONS.assetMismatch,
      message: `Paygate settles USDC at ${config.usdcAddress}`,
    };
  }
  if (r.payTo.toLowerCase() !== config.escrowAddress.toLowerCase()) {
    return { reason: R.recipientMismatch, message: `payTo must be Paygate's escrow ${config.escrowAddress}` };
  }
  if (!amount || BigInt(amount) <= 0n) {
    return { reason: R.paymentRequirements, message: 'paymentRequirements has no positive amount' };
  }
  if (BigInt(amount) < config.x402MinAmountMicro) {
    return {
      reason: R.authorizationValue,
      message: `Paygate relays x402 payments of at least ${config.x402MinAmountMicro} atomic units (${formatUsdc(config.x402MinAmountMicro)} USDC); the requirements ask ${amount}`,
    };
  }
  return undefined;
}

export function checkFacilitatorRequest(
  config: GatewayProxyConfig,
  body: FacilitatorRequest,
): CheckedRequest {
  let payment: DecodedX402Payment;
  try {
    payment = parseX402Payment(body.paymentPayload, body.x402Version);
  } catch (error) {
    return { ok: false, reason: R.payload, message: (error as X402HeaderError).message };
  }
  const refusal = refuseRequirements(config, body);
  if (refusal) return { ok: false, ...refusal, payer: payment.authorization.from };
  const r = body.paymentRequirements;
  return {
    ok: true,
    payment,
    priceMicro: BigInt((r.amount ?? r.maxAmountRequired)!),
    resourceUrl: r.resource ?? payment.resourceUrl ?? 'x402-facilitator',
    maxTimeoutSeconds: Math.min(
      r.maxTimeoutSeconds ?? config.x402MaxTimeoutSeconds,
      config.x402FacilitatorMaxTimeoutSeconds,
    ),
  };
}
