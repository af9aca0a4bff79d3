import { HttpError } from '@paygate/http';
import {
  encodeX402Header,
  requirementsV2,
  settlementResponse,
  X402_EXPOSED_HEADERS,
  X402_HEADERS,
  x402PaymentRequired,
} from '@paygate/protocol';
import { declarePaymentIdentifierExtension, PAYMENT_IDENTIFIER } from '@x402/extensions/payment-identifier';
import type { EndpointSnapshot, SkillSnapshot } from '../../skills/projection';
import { bazaarExtension } from '../extensions/bazaar';
import type { ReceiptSigner } from '../extensions/offer-receipt';
import type { X402Payments } from '../mechanisms/exact-evm/payments';

/** CORS for paid skill URLs: any origin may pay, and may read x402's answer headers. */
export const SKILL_CORS_HEADERS = Object.freeze({
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Expose-Headers': [
    ...X402_EXPOSED_HEADERS,
    'X-402-Receipt',
    'X-402-Retry-Until',
    'RateLimit-Remaining',
  ].join(', '),
});
export const SKILL_PREFLIGHT_HEADERS = Object.freeze({
  ...SKILL_CORS_HEADERS,
  'Access-Control-Allow-Methods': 'GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS',
  'Access-Control-Allow-Headers': [
    'Content-Type',
    X402_HEADERS.paymentSignature,
    X402_HEADERS.v1Payment,
    'SIGN-IN-WITH-X',
    'X-402-Payment',
    'Payment',
    'X-Request-Id',
  ].join(', '),
  'Access-Control-Max-Age': '600',
});

/** Optional: a client may pay without an id. */
const PAYMENT_IDENTIFIER_DECLARATION = Object.freeze(declarePaymentIdentifierExtension(false));

/** x402's part of a 402: the v2 `PAYMENT-REQUIRED` header and, on Base, v1's `accepts`; empty when x402 is not offered. */
export function x402Challenge(
  x402: X402Payments,
  input: Parameters<X402Payments['offer']>[0] & {
    endpoint: EndpointSnapshot;
    skill: SkillSnapshot;
    extensions?: Record<string, unknown>;
  },
  error: string,
  receipts: ReceiptSigner,
): { headers: Record<string, string>; body: Record<string, unknown> } {
  const headers: Record<string, string> = { 'Cache-Control': 'no-store' };
  const offer = x402.offered() ? x402.offer(input) : undefined;
  if (!offer) return { headers, body: {} };
  const required = x402PaymentRequired(offer, error, {
    extensions: {
      ...bazaarExtension(input.endpoint, input.skill.name, input.url, true),
      [PAYMENT_IDENTIFIER]: PAYMENT_IDENTIFIER_DECLARATION,
      ...receipts.offerExtension([{ resourceUrl: input.url, ...requirementsV2(offer) }]),
      ...input.extensions,
    },
    v1OutputSchema: { input: { type: 'http', method: input.endpoint.method, discoverable: true } },
  });
  headers[X402_HEADERS.paymentRequired] = required.header;
  return { headers, body: required.body };
}

/** x402's SettleResponse in PAYMENT-RESPONSE (v2) or X-PAYMENT-RESPONSE (v1). */
export function settlementHeaders({
  extensions,
  ...settlement
}: Parameters<typeof settlementResponse>[0] & { extensions?: Record<string, unknown> }): Record<
  string,
  string
> {
  const settled = settlementResponse(settlement);
  const body = extensions ? { ...settled, extensions } : settled;
  const name = settlement.version === 2 ? X402_HEADERS.paymentResponse : X402_HEADERS.v1PaymentResponse;
  return { [name]: encodeX402Header(body) };
}

/** A 409, 429 or 503 as libs/http's error; a 429 or 503 says when to present the payment again (Retry-After). */
export function refusalError(
  res: { setHeader(name: string, value: string): unknown },
  refusal: { status: number; reason: string; message: string; retryAfterSeconds?: number },
): HttpError {
  const retryAfterSeconds =
    refusal.status === 429 ? (refusal.retryAfterSeconds ?? 60) : refusal.status === 503 ? 2 : undefined;
  if (retryAfterSeconds !== undefined) res.setHeader('Retry-After', String(retryAfterSeconds));
  const details = refusal.status === 429 ? { retryAfterSeconds } : {};
  return new HttpError(refusal.status, refusal.reason, refusal.message, details);
}
