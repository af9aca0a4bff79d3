import { TransferAuthorization } from '@paygate/contracts';
import { decodeX402Header, X402HeaderError, x402PaymentHeaderName } from '@paygate/protocol';
import { Type } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { isValidPaymentId, PAYMENT_IDENTIFIER } from '@x402/extensions/payment-identifier';

/** The TypeBox schemas of x402's payloads, checked on every payment decoded (the transport is @paygate/protocol's). */

const Hex = (max: number) => Type.String({ pattern: `^0x[0-9a-fA-F]{2,${max}}$` });

const ExactEvmPayload = Type.Object({
  signature: Hex(4096),
  authorization: TransferAuthorization,
});

const PaymentRequirementsV2 = Type.Object({
  scheme: Type.String({ maxLength: 32 }),
  network: Type.String({ maxLength: 64 }),
  asset: Type.String({ maxLength: 128 }),
  amount: Type.String({ maxLength: 80 }),
  payTo: Type.String({ maxLength: 128 }),
  maxTimeoutSeconds: Type.Integer({ minimum: 0 }),
  extra: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
});

const ResourceInfo = Type.Object({
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
  scheme: string;
  network: string;
  authorization: TransferAuthorization;
  signature: string;
  /** Informational: as the client states it. */
  resourceUrl?: string;
  paymentId?: string;
}

/** The payment-identifier extension's `id`, by the extension's own rule, else the header is refused. */
function paymentIdOf(extensions: Record<string, unknown> | undefined, name: string): string | undefined {
  const extension = extensions?.[PAYMENT_IDENTIFIER] as { info?: { id?: unknown } } | undefined;
  const id = extension?.info?.id;
  if (id === undefined) return undefined;
  if (typeof id !== 'string' || !isValidPaymentId(id)) {
    throw new X402HeaderError(
      `${name} extensions.${PAYMENT_IDENTIFIER}.info.id must be 16 to 128 characters of A-Z, a-z, 0-9, _ and -`,
    );
  }
  return id;
}

export function decodeX402Payment(header: string, version: 1 | 2): DecodedX402Payment {
  const name = x402PaymentHeaderName(version);
  return parseX402Payment(decodeX402Header(header, name), version, name);
}

export function parseX402Payment(
  value: unknown,
  version: 1 | 2,
  name = 'paymentPayload',
): DecodedX402Payment {
  const schema = version === 2 ? PaymentPayloadV2 : PaymentPayloadV1;
  if (!Value.Check(schema, value)) {
    const first = Value.Errors(schema, value).First();
    throw new X402HeaderError(
      `${name} ${first ? `${first.path || '/'} ${first.message}` : 'does not match the schema'}`,
    );
  }
  if (value.x402Version === 2) {
    return {
      version: 2,
      scheme: value.accepted.scheme,
      network: value.accepted.network,
      authorization: value.payload.authorization,
      signature: value.payload.signature,
      resourceUrl: value.resource?.url,
      paymentId: paymentIdOf(value.extensions, name),
    };
  }
  return {
    version: 1,
    scheme: value.scheme,
    network: value.network,
    authorization: value.payload.authorization,
    signature: value.payload.signature,
  };
}
