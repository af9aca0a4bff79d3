import { createECDH, createHash, createPrivateKey, type KeyObject, sign } from 'node:crypto';
import {
  canonicalize,
  type JWSSignedOffer,
  OFFER_RECEIPT,
  type OfferInput,
} from '@x402/extensions/offer-receipt';
import { computeAddress } from 'ethers';
import { LRUCache } from 'lru-cache';

/** x402's offer-receipt (JWS, ES256K), built synchronously in `createJWS`'s layout: a 402 waits for no promise. */

export const RECEIPT_KEYS_PATH = '/.well-known/x402/receipt-keys';
export const DID_DOCUMENT_PATH = '/.well-known/did.json';
const ALGORITHM = 'ES256K';

type OfferFields = Omit<OfferInput, 'acceptIndex' | 'offerValiditySeconds'> & {
  resourceUrl: string;
  maxTimeoutSeconds: number;
};

/** The extension's fields and Paygate's (what was paid to whom, and what became of the call). */
interface ReceiptFields {
  network: string;
  resourceUrl: string;
  payer: string;
  transaction: string;
  amount: string;
  asset: string;
  payTo: string;
  outcome: 'served';
  /** A ticket's answer: 200. */
  status: number;
}

interface ReceiptPublicKey {
  kty: 'EC';
  crv: 'secp256k1';
  x: string;
  y: string;
  kid: string;
  alg: typeof ALGORITHM;
  use: 'sig';
}

export function parseReceiptKey(value: string): Buffer | undefined {
  const hex = value.trim().replace(/^0x/i, '');
  if (!/^[0-9a-fA-F]{64}$/.test(hex)) return undefined;
  const scalar = BigInt(`0x${hex}`);
  if (scalar === 0n || scalar >= SECP256K1_ORDER) return undefined;
  return Buffer.from(hex, 'hex');
}
const SECP256K1_ORDER = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

/** Outside production without a key: the same on every replica and restart (productionGuards refuses it). */
export function developmentReceiptKey(chainId: number): Buffer {
  return createHash('sha256').update(`paygate-dev-only-receipt-signing-key:${chainId}`).digest();
}

function didWebOf(publicBaseUrl: string): string {
  const url = new URL(publicBaseUrl);
  const path = url.pathname.replace(/\/+$/, '');
  const segments = path ? path.split('/').filter(Boolean).map(encodeURIComponent) : [];
  return ['did:web', encodeURIComponent(url.host), ...segments].join(':');
}

const b64url = (bytes: Buffer | string) => Buffer.from(bytes).toString('base64url');

/** Offers kept while at least half their validity remains: a 402 is not a signature per request. */
const OFFER_CACHE_ENTRIES = 10_000;

export class ReceiptSigner {
  readonly kid: string;
  readonly address: string;
  readonly publicKey: ReceiptPublicKey;
  private readonly key: KeyObject;
  private readonly header: string;
  private readonly offers = new LRUCache<string, { offer: JWSSignedOffer; validUntil: number }>({
    max: OFFER_CACHE_ENTRIES,
  });

  constructor(
    privateKey: Buffer,
    publicBaseUrl: string,
    private readonly now: () => Date,
  ) {
    const ecdh = createECDH('secp256k1');
    ecdh.setPrivateKey(privateKey);
    const point = ecdh.getPublicKey();
    const x = b64url(point.subarray(1, 33));
    const y = b64url(point.subarray(33, 65));
    this.key = createPrivateKey({
      key: { kty: 'EC', crv: 'secp256k1', d: b64url(privateKey), x, y },
      format: 'jwk',
    });
    // Its thumbprint's first bytes: a rotated key has a new id.
    const thumbprint = createHash('sha256')
      .update(JSON.stringify({ crv: 'secp256k1', kty: 'EC', x, y }))
      .digest()
      .subarray(0, 8)
      .toString('hex');
    this.kid = `${didWebOf(publicBaseUrl)}#receipt-${thumbprint}`;
    this.address = computeAddress(`0x${point.toString('hex')}`);
    this.publicKey = { kty: 'EC', crv: 'secp256k1', x, y, kid: this.kid, alg: ALGORITHM, use: 'sig' };
    this.header = b64url(JSON.stringify({ alg: ALGORITHM, kid: this.kid }));
  }

  private jws(payload: object): string {
    const input = `${this.header}.${b64url(canonicalize(payload))}`;
    const signature = sign('sha256', Buffer.from(input), { key: this.key, dsaEncoding: 'ieee-p1363' });
    return `${input}.${signature.toString('base64url')}`;
  }

  /** One signed offer per `accepts` entry, valid for its maxTimeoutSeconds. */
  offerExtension(offers: ReadonlyArray<OfferFields>): Record<string, unknown> {
    const nowSeconds = Math.floor(this.now().getTime() / 1000);
    const signed = offers.map((fields, acceptIndex) => {
      const cacheKey = `${acceptIndex}|${fields.resourceUrl}|${fields.scheme}|${fields.network}|${fields.asset}|${fields.payTo}|${fields.amount}`;
      const cached = this.offers.get(cacheKey);
      if (cached && cached.validUntil - nowSeconds >= fields.maxTimeoutSeconds / 2) return cached.offer;
      const validUntil = nowSeconds + fields.maxTimeoutSeconds;
      const offer: JWSSignedOffer = {
        format: 'jws',
        acceptIndex,
        signature: this.jws({
          version: 1,
          resourceUrl: fields.resourceUrl,
          scheme: fields.scheme,
          network: fields.network,
          asset: fields.asset,
          payTo: fields.payTo,
          amount: fields.amount,
          validUntil,
        }),
      };
      this.offers.set(cacheKey, { offer, validUntil });
      return offer;
    });
    return { [OFFER_RECEIPT]: { info: { offers: signed }, schema: OFFER_SCHEMA } };
  }

  receiptExtension(fields: ReceiptFields): Record<string, unknown> {
    const receipt: JWSSignedOffer = {
      format: 'jws',
      signature: this.jws({
        version: 1,
        issuedAt: Math.floor(this.now().getTime() / 1000),
        ...fields,
      }),
    };
    return { [OFFER_RECEIPT]: { info: { receipt }, schema: RECEIPT_SCHEMA } };
  }

  keySet() {
    return { keys: [{ ...this.publicKey, address: this.address }] };
  }

  didDocument() {
    const did = this.kid.slice(0, this.kid.indexOf('#'));
    return {
      '@context': ['https://www.w3.org/ns/did/v1', 'https://w3id.org/security/suites/jws-2020/v1'],
      id: did,
      verificationMethod: [
        {
          id: this.kid,
          type: 'JsonWebKey2020',
          controller: did,
          publicKeyJwk: { kty: 'EC', crv: 'secp256k1', x: this.publicKey.x, y: this.publicKey.y },
        },
      ],
      assertionMethod: [this.kid],
    };
  }
}

const OFFER_SCHEMA = Object.freeze({
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  properties: {
    offers: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          format: { type: 'string' },
          acceptIndex: { type: 'integer' },
          signature: { type: 'string' },
        },
        required: ['format', 'signature'],
      },
    },
  },
  required: ['offers'],
});

const RECEIPT_SCHEMA = Object.freeze({
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  properties: {
    receipt: {
      type: 'object',
      properties: { format: { type: 'string' }, signature: { type: 'string' } },
      required: ['format', 'signature'],
    },
  },
  required: ['receipt'],
});
