import {
  decodeX402Payment,
  encodeX402Header,
  requirementsV1,
  requirementsV2,
  type SettleResponse,
  X402_HEADERS,
  X402HeaderError,
  type X402Offer,
} from '@paygate/protocol';
import type { Request, Response } from 'express';
import { answerRateLimited, MIDDLEWARE_REASONS, sendError } from './error-answers';
import type { AnswerPaymentRequired, X402RouteOf } from './gateway-answers';
import { type Offer, type PaidRequest, usdcOption } from './gateway-offers';
import { type PaygateApi, PaygateUnavailableError } from './paygate-api';
import { type PaymentParametersSource, usdcDomainOf } from './payment-parameters';
import type { GatewayConfig } from './types';

type X402Header = { value: string; version: 1 | 2 };

/** Settles a PAYMENT-SIGNATURE / X-PAYMENT into escrow, then calls the handler (or answers the refusal). */
export type PayWithX402 = (paid: PaidRequest, header: X402Header) => Promise<void>;

/** GatewayConfig.x402 with its defaults, or undefined when x402 is switched off. */
export function x402Settings(config: GatewayConfig) {
  if (config.x402 === false) return undefined;
  const given = config.x402 === true || config.x402 === undefined ? {} : config.x402;
  const minAmountMicro = usdcOption(given.minAmount ?? '0.01', 'createGateway: x402.minAmount');
  const maxTimeoutSeconds = given.maxTimeoutSeconds ?? 300;
  if (!Number.isInteger(maxTimeoutSeconds) || maxTimeoutSeconds < 10 || maxTimeoutSeconds > 3600) {
    throw new TypeError('createGateway: x402.maxTimeoutSeconds must be an integer from 10 to 3600');
  }
  const settleTimeoutMs = given.settleTimeoutMs ?? 30_000;
  if (!Number.isInteger(settleTimeoutMs) || settleTimeoutMs < 1) {
    throw new TypeError('createGateway: x402.settleTimeoutMs must be a positive integer (milliseconds)');
  }
  return { minAmountMicro, maxTimeoutSeconds, settleTimeoutMs, eip712: given.eip712 };
}

/** x402 is offered on pay-per-call routes priced at least the relaying minimum (see GatewayConfig.x402). */
export function x402RouteOf(
  settings: ReturnType<typeof x402Settings>,
  originOf: (req: Request) => string,
): X402RouteOf {
  return (offer, p, req) => {
    if (!settings || offer.type !== 'payPerCall' || offer.priceMicro < settings.minAmountMicro)
      return undefined;
    const eip712 = settings.eip712 ?? usdcDomainOf(p.chainId);
    if (!eip712) return undefined;
    return {
      chainId: p.chainId,
      asset: p.asset,
      payTo: p.payTo,
      eip712,
      amountMicro: offer.priceMicro,
      maxTimeoutSeconds: settings.maxTimeoutSeconds,
      resource: {
        url: `${originOf(req)}${req.originalUrl}`,
        description: offer.description,
        mimeType: 'application/json',
      },
    };
  };
}

type X402Refusal = { reason: string; message: string };

/** What to ask Paygate's facilitator to settle, or why the presented payment cannot be settled here. */
function settleRequest(
  offer: Offer,
  route: X402Offer | undefined,
  header: X402Header,
): X402Refusal | { paymentPayload: Record<string, unknown>; paymentRequirements: Record<string, unknown> } {
  if (!route) {
    return {
      reason: 'x402_not_offered',
      message: `this route is not paid with x402 (${offer.type}, ${offer.price} USDC): pay with X-402-Payment`,
    };
  }
  const requirements =
    header.version === 2 ? { ...requirementsV2(route), resource: route.resource.url } : requirementsV1(route);
  if (!requirements) {
    return {
      reason: 'invalid_exact_evm_network_mismatch',
      message: 'x402 v1 is offered on Base only: pay with v2',
    };
  }
  try {
    return {
      paymentPayload: decodeX402Payment(header.value, header.version),
      paymentRequirements: requirements,
    };
  } catch (error) {
    if (error instanceof X402HeaderError) return { reason: error.reason, message: error.message };
    throw error;
  }
}

/** 429 or 503 from the facilitator: the same status, coded with its reason, to present the same header again. */
async function answerSettleLater(res: Response, answer: globalThis.Response): Promise<void> {
  const body = (await answer.json().catch(() => ({}))) as Partial<SettleResponse> & {
    error?: { code?: unknown };
  };
  const given = body.errorReason ?? (typeof body.error?.code === 'string' ? body.error.code : undefined);
  const message =
    body.errorMessage ?? 'Paygate could not settle the payment now; present the same header again';
  if (answer.status === 429)
    return answerRateLimited(res, answer, given ?? MIDDLEWARE_REASONS.rateLimited, message);
  res.setHeader('Retry-After', answer.headers.get('retry-after') ?? '2');
  sendError(res, answer.status, given ?? MIDDLEWARE_REASONS.paygateUnavailable, message);
}

/** PAYMENT-SIGNATURE / X-PAYMENT: settled into escrow by Paygate's facilitator before the handler runs. */
export function x402Payer(
  api: PaygateApi,
  parameters: PaymentParametersSource,
  settleTimeoutMs: number,
  routeOf: X402RouteOf,
  paymentRequired: AnswerPaymentRequired,
): PayWithX402 {
  return async (paid, header) => {
    const { offer, req, res } = paid;
    const p = await parameters.get();
    if (!p) throw new PaygateUnavailableError('payment parameters unknown: Paygate unreachable');
    const refuse = (reason: string, message: string) =>
      paymentRequired(paid, { error: 'Invalid payment', reason, message });
    const request = settleRequest(offer, routeOf(offer, p, req), header);
    if ('reason' in request) return refuse(request.reason, request.message);
    const body = { x402Version: header.version, ...request };
    const answer = await api.post('/api/v1/x402/settle', body, settleTimeoutMs);
    if (answer.status === 429 || answer.status === 503) return answerSettleLater(res, answer);
    if (!answer.ok) {
      throw new PaygateUnavailableError(`Paygate answered ${answer.status} to POST /api/v1/x402/settle`);
    }
    const settled = (await answer.json()) as SettleResponse;
    if (!settled.success) {
      return refuse(settled.errorReason ?? 'settlement_failed', settled.errorMessage ?? 'not settled');
    }
    const { transaction, network, payer } = settled;
    res.setHeader(
      header.version === 2 ? X402_HEADERS.paymentResponse : X402_HEADERS.v1PaymentResponse,
      encodeX402Header({ success: true, transaction, network, payer }),
    );
    req.x402 = { txHash: transaction, amount: offer.price, payer: payer ?? '', network: p.network };
    paid.next();
  };
}
