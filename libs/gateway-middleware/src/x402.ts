import type { PaymentParameters } from './payment-parameters';

/**
 * The x402 standard beside Paygate's own proof: v2 (`PAYMENT-REQUIRED` / `PAYMENT-SIGNATURE` /
 * `PAYMENT-RESPONSE`) everywhere, v1 (body `accepts`, `X-PAYMENT`, `X-PAYMENT-RESPONSE`) on Base networks, for
 * the `exact` scheme (EIP-3009 TransferWithAuthorization into Paygate's escrow, submitted by Paygate's relayer).
 */
export const X402_HEADERS = {
  paymentRequired: 'PAYMENT-REQUIRED',
  paymentSignature: 'PAYMENT-SIGNATURE',
  paymentResponse: 'PAYMENT-RESPONSE',
  v1Payment: 'X-PAYMENT',
  v1PaymentResponse: 'X-PAYMENT-RESPONSE',
} as const;

/** A header bigger than this is refused before decoding (an authorization with a 1271 signature fits easily). */
const MAX_HEADER_BYTES = 16 * 1024;
const V1_NETWORKS: Readonly<Record<number, string>> = { 8453: 'base', 84532: 'base-sepolia' };

export interface X402Route {
  parameters: PaymentParameters;
  eip712: { name: string; version: string };
  amountMicro: bigint;
  maxTimeoutSeconds: number;
  resource: { url: string; description: string; mimeType: string };
}

export function requirementsV2(route: X402Route) {
  return {
    scheme: 'exact',
    network: `eip155:${route.parameters.chainId}`,
    amount: route.amountMicro.toString(),
    asset: route.parameters.asset,
    payTo: route.parameters.payTo,
    maxTimeoutSeconds: route.maxTimeoutSeconds,
    extra: { name: route.eip712.name, version: route.eip712.version },
  };
}

/** v1's accepts entry, on Base and Base Sepolia only (v1 names no other EVM chain). */
export function requirementsV1(route: X402Route) {
  const network = V1_NETWORKS[route.parameters.chainId];
  if (!network) return undefined;
  return {
    scheme: 'exact',
    network,
    maxAmountRequired: route.amountMicro.toString(),
    resource: route.resource.url,
    description: route.resource.description,
    mimeType: route.resource.mimeType,
    payTo: route.parameters.payTo,
    maxTimeoutSeconds: route.maxTimeoutSeconds,
    asset: route.parameters.asset,
    extra: { name: route.eip712.name, version: route.eip712.version },
  };
}

/** The 402's x402 part: the PAYMENT-REQUIRED header, and v1's body fields on Base. */
export function x402Challenge(route: X402Route, error: string) {
  const v1 = requirementsV1(route);
  return {
    header: encodeX402Header({
      x402Version: 2,
      error,
      resource: route.resource,
      accepts: [requirementsV2(route)],
    }),
    body: v1 ? { x402Version: 1, accepts: [v1] } : {},
  };
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

export class X402PayloadError extends Error {
  readonly reason = 'invalid_payload';
}

/** A payment header as JSON (base64 of UTF-8 JSON, a JSON object); Paygate's facilitator checks the rest. */
export function decodeX402Payment(header: string, version: 1 | 2): Record<string, unknown> {
  const name = version === 2 ? X402_HEADERS.paymentSignature : X402_HEADERS.v1Payment;
  const trimmed = header.trim();
  if (trimmed.length > MAX_HEADER_BYTES)
    throw new X402PayloadError(`${name} is larger than ${MAX_HEADER_BYTES} bytes`);
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(trimmed)) throw new X402PayloadError(`${name} is not base64`);
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(trimmed, 'base64').toString('utf8'));
  } catch {
    throw new X402PayloadError(`${name} is not base64-encoded JSON`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new X402PayloadError(`${name} must be a JSON object`);
  }
  if ((value as { x402Version?: unknown }).x402Version !== version) {
    throw new X402PayloadError(`${name} must carry x402Version ${version}`);
  }
  return value as Record<string, unknown>;
}

export function encodeX402Header(value: unknown): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64');
}

/** x402's SettleResponse, as Paygate's facilitator answers it. */
export interface SettleResponse {
  success: boolean;
  transaction: string;
  network: string;
  payer?: string;
  errorReason?: string;
  errorMessage?: string;
}
