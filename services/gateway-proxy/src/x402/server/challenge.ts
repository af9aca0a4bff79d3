import {
  encodeX402Header,
  requirementsV2,
  settlementResponse,
  X402_EXPOSED_HEADERS,
  X402_HEADERS,
  type X402Offer,
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

export interface Challenge {
  headers: Record<string, string>;
  /** v1's fields in the 402 body (Base and Base Sepolia only). */
  body: Record<string, unknown>;
}

/**
 * x402's payment-identifier extension as Paygate declares it (optional: a client may pay without an id).
 * Built once: the declaration is static.
 */
const PAYMENT_IDENTIFIER_DECLARATION = Object.freeze(declarePaymentIdentifierExtension(false));

/**
 * x402's part of a 402 answer: the v2 `PAYMENT-REQUIRED` header (with the bazaar and payment-identifier
 * extensions) and, on Base networks, v1's `accepts` in the body. Empty when x402 is not offered right now (relayer out of gas or away).
 */
export function x402Challenge(
  x402: X402Payments,
  input: {
    url: string;
    description: string;
    priceMicro: bigint;
    endpoint: EndpointSnapshot;
    skill: SkillSnapshot;
    /** More extensions of this offer (sign-in-with-x's challenge on a subscription). */
    extensions?: Record<string, unknown>;
  },
  error: string,
  receipts?: ReceiptSigner,
): Challenge {
  const headers: Record<string, string> = { 'Cache-Control': 'no-store' };
  if (!x402.offered()) return { headers, body: {} };
  const offer = x402.offer({
    url: input.url,
    description: input.description,
    mimeType: 'application/json',
    priceMicro: input.priceMicro,
  });
  if (!offer) return { headers, body: {} };
  const required = x402PaymentRequired(offer, error, {
    extensions: {
      ...bazaarExtension(input.endpoint, input.skill.name, input.url, true),
      [PAYMENT_IDENTIFIER]: PAYMENT_IDENTIFIER_DECLARATION,
      // x402's offer-receipt: the offer signed by Paygate (what is paid, to whom, for which URL, until when).
      ...receipts?.offerExtension([{ resourceUrl: input.url, ...requirementsV2(offer) }]),
      ...input.extensions,
    },
    v1OutputSchema: { input: { type: 'http', method: input.endpoint.method, discoverable: true } },
  });
  headers[X402_HEADERS.paymentRequired] = required.header;
  return { headers, body: required.body };
}

/** The settlement header of a paid answer, in the version the client spoke. */
export function settlementHeaders(input: {
  version: 1 | 2;
  txHash: string;
  chainId: number;
  payer: string;
  /** Extensions of the settlement response (offer-receipt's signed receipt). */
  extensions?: Record<string, unknown>;
}): Record<string, string> {
  const settled = settlementResponse({
    success: true,
    transaction: input.txHash,
    chainId: input.chainId,
    payer: input.payer,
    version: input.version,
  });
  const body = input.extensions ? { ...settled, extensions: input.extensions } : settled;
  return {
    [input.version === 2 ? X402_HEADERS.paymentResponse : X402_HEADERS.v1PaymentResponse]:
      encodeX402Header(body),
  };
}

export type { X402Offer };
