/** x402's HTTP transport (v2 headers, v1 body, X-PAYMENT*) for `exact` on EVM; the gateway checks schemas. */
export const X402_HEADERS = {
  paymentRequired: 'PAYMENT-REQUIRED',
  paymentSignature: 'PAYMENT-SIGNATURE',
  paymentResponse: 'PAYMENT-RESPONSE',
  v1Payment: 'X-PAYMENT',
  v1PaymentResponse: 'X-PAYMENT-RESPONSE',
} as const;

/** Headers a browser client must be able to read on a cross-origin answer. */
export const X402_EXPOSED_HEADERS = [
  X402_HEADERS.paymentRequired,
  X402_HEADERS.paymentResponse,
  X402_HEADERS.v1PaymentResponse,
];

/** Refused before decoding (an authorization with a 1271 signature fits easily). */
export const MAX_X402_HEADER_BYTES = 16 * 1024;

/** CAIP-2 names in v2, legacy names in v1 (only Base's). */
export const caip2 = (chainId: number) => `eip155:${chainId}`;
const V1_NETWORKS: Readonly<Record<number, string>> = { 8453: 'base', 84532: 'base-sepolia' };
export const v1NetworkOf = (chainId: number): string | undefined => V1_NETWORKS[chainId];

/** A payment header that does not decode (x402's reason `invalid_payload`). */
export class X402HeaderError extends Error {
  override name = 'X402HeaderError';
  readonly reason = 'invalid_payload';
}

/** Standard base64 of UTF-8 JSON, as every x402 header carries. */
export function encodeX402Header(value: unknown): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64');
}

/** An x402 header's JSON (size checked before trimming); `name` names the header in errors. */
export function decodeX402Header(header: string, name: string): unknown {
  if (header.length > MAX_X402_HEADER_BYTES) {
    throw new X402HeaderError(`${name} is larger than ${MAX_X402_HEADER_BYTES} bytes`);
  }
  const trimmed = header.trim();
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(trimmed)) throw new X402HeaderError(`${name} is not base64`);
  try {
    return JSON.parse(Buffer.from(trimmed, 'base64').toString('utf8'));
  } catch {
    throw new X402HeaderError(`${name} is not base64-encoded JSON`);
  }
}

export const x402PaymentHeaderName = (version: 1 | 2) =>
  version === 2 ? X402_HEADERS.paymentSignature : X402_HEADERS.v1Payment;

/** A payment header as a JSON object of that x402Version; the rest is the facilitator's to check. */
export function decodeX402Payment(header: string, version: 1 | 2): Record<string, unknown> {
  const name = x402PaymentHeaderName(version);
  const value = decodeX402Header(header, name);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new X402HeaderError(`${name} must be a JSON object`);
  }
  if ((value as { x402Version?: unknown }).x402Version !== version) {
    throw new X402HeaderError(`${name} must carry x402Version ${version}`);
  }
  return value as Record<string, unknown>;
}

export function decodePaymentRequired(header: string): unknown {
  return decodeX402Header(header, X402_HEADERS.paymentRequired);
}

/** The x402 payment header of a request and its version (v2 wins when both are sent). */
export function pickX402Header(
  get: (lowercaseName: string) => string | string[] | undefined,
): { value: string; version: 1 | 2 } | undefined {
  const v2 = get('payment-signature');
  if (typeof v2 === 'string' && v2) return { value: v2, version: 2 };
  const v1 = get('x-payment');
  if (typeof v1 === 'string' && v1) return { value: v1, version: 1 };
  return undefined;
}

/** What a route costs, as x402 states it. */
export interface X402Offer {
  chainId: number;
  asset: string;
  payTo: string;
  amountMicro: bigint;
  maxTimeoutSeconds: number;
  /** The token's EIP-712 domain name and version. */
  eip712: { name: string; version: string };
  resource: { url: string; description: string; mimeType: string };
}

export function requirementsV2(offer: X402Offer) {
  return {
    scheme: 'exact',
    network: caip2(offer.chainId),
    amount: offer.amountMicro.toString(),
    asset: offer.asset,
    payTo: offer.payTo,
    maxTimeoutSeconds: offer.maxTimeoutSeconds,
    extra: { name: offer.eip712.name, version: offer.eip712.version },
  };
}

/** v1's accepts entry (Base and Base Sepolia only: v1 names no other EVM chain), or undefined on other chains. */
export function requirementsV1(offer: X402Offer, outputSchema?: unknown) {
  const network = v1NetworkOf(offer.chainId);
  if (!network) return undefined;
  return {
    scheme: 'exact',
    network,
    maxAmountRequired: offer.amountMicro.toString(),
    resource: offer.resource.url,
    description: offer.resource.description,
    mimeType: offer.resource.mimeType,
    payTo: offer.payTo,
    maxTimeoutSeconds: offer.maxTimeoutSeconds,
    asset: offer.asset,
    ...(outputSchema ? { outputSchema } : {}),
    extra: { name: offer.eip712.name, version: offer.eip712.version },
  };
}

/** A 402's x402 part: the `PAYMENT-REQUIRED` header, and v1's body fields on Base networks (else `{}`). */
export function x402PaymentRequired(
  offer: X402Offer,
  error: string,
  options: { extensions?: Record<string, unknown>; v1OutputSchema?: unknown } = {},
): { header: string; body: Record<string, unknown> } {
  const v1 = requirementsV1(offer, options.v1OutputSchema);
  const { extensions } = options;
  return {
    header: encodeX402Header({
      x402Version: 2,
      error,
      resource: offer.resource,
      accepts: [requirementsV2(offer)],
      ...(extensions ? { extensions } : {}),
    }),
    body: v1 ? { x402Version: 1, accepts: [v1] } : {},
  };
}

/** The `PAYMENT-RESPONSE` / `X-PAYMENT-RESPONSE` header's JSON. */
export interface SettleResponse {
  success: boolean;
  transaction: string;
  network: string;
  payer?: string;
  errorReason?: string;
  errorMessage?: string;
}

/** The settlement answer, the network named as the client's version names it. */
export function settlementResponse(input: {
  success: boolean;
  transaction: string;
  chainId: number;
  payer: string;
  version: 1 | 2;
  errorReason?: string;
}) {
  return {
    success: input.success,
    transaction: input.transaction,
    network:
      input.version === 2 ? caip2(input.chainId) : (v1NetworkOf(input.chainId) ?? caip2(input.chainId)),
    payer: input.payer,
    ...(input.errorReason ? { errorReason: input.errorReason } : {}),
  };
}
