import { TransferAuthorization } from '@paygate/contracts';
import { type Static, Type } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';

/**
 * The x402 standard's HTTP transport (v2: `PAYMENT-REQUIRED` / `PAYMENT-SIGNATURE` / `PAYMENT-RESPONSE`; v1:
 * the body's `accepts`, `X-PAYMENT`, `X-PAYMENT-RESPONSE`), for the `exact` scheme on EVM (EIP-3009
 * TransferWithAuthorization). Paygate's own tx-hash proof (`X-402-Payment`) lives beside it, unchanged.
 */
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

/** A header bigger than this is refused before decoding (an authorization with a 1271 signature fits easily). */
export const MAX_X402_HEADER_BYTES = 16 * 1024;

/** x402's names for EVM networks: CAIP-2 in v2, the legacy names in v1 (only Base's are offered there). */
export const caip2 = (chainId: number) => `eip155:${chainId}`;
const V1_NETWORKS: Record<number, string> = { 8453: 'base', 84532: 'base-sepolia' };
export const v1NetworkOf = (chainId: number): string | undefined => V1_NETWORKS[chainId];

const Hex = (max: number) => Type.String({ pattern: `^0x[0-9a-fA-F]{2,${max}}$` });

export const ExactEvmPayload = Type.Object({
  signature: Hex(4096),
  authorization: TransferAuthorization,
});

export const PaymentRequirementsV2 = Type.Object({
  scheme: Type.String({ maxLength: 32 }),
  network: Type.String({ maxLength: 64 }),
  asset: Type.String({ maxLength: 128 }),
  amount: Type.String({ maxLength: 80 }),
  payTo: Type.String({ maxLength: 128 }),
  maxTimeoutSeconds: Type.Integer({ minimum: 0 }),
  extra: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
});
export type PaymentRequirementsV2 = Static<typeof PaymentRequirementsV2>;

export const ResourceInfo = Type.Object({
  url: Type.String({ maxLength: 2048 }),
  description: Type.Optional(Type.String({ maxLength: 4096 })),
  mimeType: Type.Optional(Type.String({ maxLength: 256 })),
});

const PaymentPayloadV2 = Type.Object({
  x402Version: Type.Literal(2),
  resource: Type.Optional(ResourceInfo),
  accepted: PaymentRequirementsV2,
  payload: ExactEvmPayload,
  extensions: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
});

const PaymentPayloadV1 = Type.Object({
  x402Version: Type.Literal(1),
  scheme: Type.String({ maxLength: 32 }),
  network: Type.String({ maxLength: 64 }),
  payload: ExactEvmPayload,
});

/** What a payment header says, whichever version carried it. Only `authorization` and `signature` are trusted. */
export interface DecodedX402Payment {
  version: 1 | 2;
  /** The scheme and network the client says it paid with (checked against our own requirements). */
  scheme: string;
  network: string;
  authorization: TransferAuthorization;
  signature: string;
  /** v2's resource URL as the client states it (informational). */
  resourceUrl?: string;
}

export class X402HeaderError extends Error {
  readonly reason = 'invalid_payload';
  constructor(message: string) {
    super(message);
    this.name = 'X402HeaderError';
  }
}

/** Standard base64 of UTF-8 JSON, as every x402 header carries. */
export function encodeX402Header(value: unknown): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64');
}

function decodeJson(header: string, name: string): unknown {
  if (header.length > MAX_X402_HEADER_BYTES) {
    throw new X402HeaderError(`${name} is larger than ${MAX_X402_HEADER_BYTES} bytes`);
  }
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(header.trim())) throw new X402HeaderError(`${name} is not base64`);
  try {
    return JSON.parse(Buffer.from(header.trim(), 'base64').toString('utf8'));
  } catch {
    throw new X402HeaderError(`${name} is not base64-encoded JSON`);
  }
}

function firstError(schema: Parameters<typeof Value.Errors>[0], value: unknown): string {
  const first = Value.Errors(schema, value).First();
  return first ? `${first.path || '/'} ${first.message}` : 'does not match the schema';
}

/** Decodes `PAYMENT-SIGNATURE` (v2) or `X-PAYMENT` (v1): size limit, base64, JSON, schema. */
export function decodeX402Payment(header: string, version: 1 | 2): DecodedX402Payment {
  const name = version === 2 ? X402_HEADERS.paymentSignature : X402_HEADERS.v1Payment;
  return parseX402Payment(decodeJson(header, name), version, name);
}

/** A payment payload already parsed from JSON (the facilitator API carries it in its body). */
export function parseX402Payment(
  value: unknown,
  version: 1 | 2,
  name = 'paymentPayload',
): DecodedX402Payment {
  if (version === 2) {
    if (!Value.Check(PaymentPayloadV2, value)) {
      throw new X402HeaderError(`${name} ${firstError(PaymentPayloadV2, value)}`);
    }
    return {
      version: 2,
      scheme: value.accepted.scheme,
      network: value.accepted.network,
      authorization: value.payload.authorization,
      signature: value.payload.signature,
      resourceUrl: value.resource?.url,
    };
  }
  if (!Value.Check(PaymentPayloadV1, value)) {
    throw new X402HeaderError(`${name} ${firstError(PaymentPayloadV1, value)}`);
  }
  return {
    version: 1,
    scheme: value.scheme,
    network: value.network,
    authorization: value.payload.authorization,
    signature: value.payload.signature,
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

/** Decodes a PAYMENT-REQUIRED header (tests and tools). */
export function decodePaymentRequired(header: string): unknown {
  return decodeJson(header, X402_HEADERS.paymentRequired);
}

/** What a route costs, as x402 states it. */
export interface X402Offer {
  chainId: number;
  asset: string;
  payTo: string;
  amountMicro: bigint;
  maxTimeoutSeconds: number;
  /** The token's EIP-712 domain name and version, read from the contract. */
  eip712: { name: string; version: string };
  resource: { url: string; description: string; mimeType: string };
}

export function requirementsV2(offer: X402Offer): PaymentRequirementsV2 {
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

/** v1's accepts entry (Base and Base Sepolia only), or undefined on other chains. */
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

export function paymentRequiredV2(offer: X402Offer, error: string, extensions?: Record<string, unknown>) {
  return {
    x402Version: 2,
    error,
    resource: offer.resource,
    accepts: [requirementsV2(offer)],
    ...(extensions ? { extensions } : {}),
  };
}

/** The settlement answer both versions carry (`PAYMENT-RESPONSE` / `X-PAYMENT-RESPONSE`). */
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
