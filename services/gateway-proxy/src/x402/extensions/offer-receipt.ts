import { createECDH, createHash, createPrivateKey, type KeyObject, sign } from 'node:crypto';
import { canonicalize, OFFER_RECEIPT } from '@x402/extensions/offer-receipt';
import { computeAddress } from 'ethers';
import { LRUCache } from 'lru-cache';

/**
 * x402's offer-receipt extension (`@x402/extensions/offer-receipt`, JWS format, ES256K): Paygate signs the
 * offers of its 402s and the receipt of every paid answer with one secp256k1 key (RECEIPT_SIGNING_KEY), whose
 * public half is published at RECEIPT_KEYS_PATH (a JWKS) and in a did:web document, so anyone can check them
 * offline with the extension's `verifyOfferSignatureJWS` / `verifyReceiptSignatureJWS`.
 *
 * The JWS is assembled here, synchronously (the extension's `createJWS` layout: header `{alg, kid}`, the payload
 * canonicalized by its `canonicalize`, an ES256K signature over `header.payload`), so a 402 and a paid answer
 * wait for no promise.
 */

export const RECEIPT_KEYS_PATH = '/.well-known/x402/receipt-keys';
export const DID_DOCUMENT_PATH = '/.well-known/did.json';
const ALGORITHM = 'ES256K';

/** The payload fields the extension's offer defines (its `OfferPayload`). */
export interface OfferFields {
  resourceUrl: string;
  scheme: string;
  network: string;
  asset: string;
  payTo: string;
  amount: string;
  maxTimeoutSeconds: number;
}

/** A signed offer or receipt as the extension carries it (JWS: no payload beside the signature). */
export interface SignedArtifact {
  format: 'jws';
  acceptIndex?: number;
  signature: string;
}

/**
 * What a receipt names: the extension's fields (network, resourceUrl, payer, issuedAt, transaction) and Paygate's
 * (what was paid to whom, and what became of the call), all under the one signature.
 */
export interface ReceiptFields {
  network: string;
  resourceUrl: string;
  payer: string;
  transaction: string;
  /** Atomic units of `asset` (micro-USDC), as the offer's `amount`. */
  amount: string;
  asset: string;
  payTo: string;
  /** `served`: the seller answered (its status) or the ticket was issued. */
  outcome: 'served';
  /** The seller's HTTP status (a ticket's answer: 200). */
  status: number;
}

/** The public key as a JWK (`kid`, `alg`, `use`), and its Ethereum address for those who prefer that name. */
export interface ReceiptPublicKey {
  kty: 'EC';
  crv: 'secp256k1';
  x: string;
  y: string;
  kid: string;
  alg: typeof ALGORITHM;
  use: 'sig';
}

/** RECEIPT_SIGNING_KEY: 32 bytes of hex (0x optional), a valid secp256k1 scalar. Undefined when it is not. */
export function parseReceiptKey(value: string): Buffer | undefined {
  const hex = value.trim().replace(/^0x/i, '');
  if (!/^[0-9a-fA-F]{64}$/.test(hex)) return undefined;
  const scalar = BigInt(`0x${hex}`);
  if (scalar === 0n || scalar >= SECP256K1_ORDER) return undefined;
  return Buffer.from(hex, 'hex');
}
const SECP256K1_ORDER = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

/**
 * The key outside production when none is set: derived from a fixed label and the chain, so every replica and
 * every restart of a dev or test system signs with the same key. productionGuards refuses to start without one.
 */
export function developmentReceiptKey(chainId: number): Buffer {
  return createHash('sha256').update(`paygate-dev-only-receipt-signing-key:${chainId}`).digest();
}

/** did:web of the public base URL's host (a port is percent-encoded, as did:web writes it). */
export function didWebOf(publicBaseUrl: string): string {
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
  private readonly offers = new LRUCache<string, { offer: SignedArtifact; validUntil: number }>({
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
    // The key's id: its thumbprint's first bytes, so a rotated key has a new id and old receipts keep theirs.
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

  /** A JWS compact serialization of the payload, as the extension's `createJWS` lays it out. */
  private jws(payload: object): string {
    const input = `${this.header}.${b64url(canonicalize(payload))}`;
    const signature = sign('sha256', Buffer.from(input), { key: this.key, dsaEncoding: 'ieee-p1363' });
    return `${input}.${signature.toString('base64url')}`;
  }

  /**
   * The extension's part of a 402: `extensions["offer-receipt"]` with one signed offer per `accepts` entry, valid
   * for the entry's maxTimeoutSeconds (`validUntil`).
   */
  offerExtension(offers: ReadonlyArray<OfferFields>): Record<string, unknown> {
    const nowSeconds = Math.floor(this.now().getTime() / 1000);
    const signed = offers.map((fields, acceptIndex) => {
      const cacheKey = `${acceptIndex}|${fields.resourceUrl}|${fields.scheme}|${fields.network}|${fields.asset}|${fields.payTo}|${fields.amount}`;
      const cached = this.offers.get(cacheKey);
      if (cached && cached.validUntil - nowSeconds >= fields.maxTimeoutSeconds / 2) return cached.offer;
      const validUntil = nowSeconds + fields.maxTimeoutSeconds;
      const offer: SignedArtifact = {
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

  /** The extension's part of a settlement response: `extensions["offer-receipt"].info.receipt`. */
  receiptExtension(fields: ReceiptFields): Record<string, unknown> {
    const receipt: SignedArtifact = {
      format: 'jws',
      signature: this.jws({
        version: 1,
        issuedAt: Math.floor(this.now().getTime() / 1000),
        ...fields,
      }),
    };
    return { [OFFER_RECEIPT]: { info: { receipt }, schema: RECEIPT_SCHEMA } };
  }

  /** GET RECEIPT_KEYS_PATH: the JWKS a verifier checks offers and receipts with (and the key's address). */
  keySet() {
    return { keys: [{ ...this.publicKey, address: this.address }] };
  }

  /** GET /.well-known/did.json: the did:web document the kid names, so a resolver finds the key by itself. */
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

/** The extension's JSON schemas of its info (offers, receipt), as `@x402/extensions` declares them. */
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
