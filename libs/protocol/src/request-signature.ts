import { createHmac } from 'node:crypto';

/**
 * Paygate's signature on every request it forwards to a seller (PROXY mode). `kid=sk`: HMAC-SHA256 with a key
 * derived from the seller's secret API key, so no other secret is handed out; any other kid: ES256 by that key of
 * the gateway's JWKS (accounts whose key predates forwarding keys).
 */
export const REQUEST_SIGNATURE_HEADER = 'X-Paygate-Signature';
export const PAID_REQUEST_HEADERS = {
  skill: 'x-paygate-skill',
  txHash: 'x-paygate-tx-hash',
  payer: 'x-paygate-payer',
  amount: 'x-paygate-amount',
} as const;
/** sha256 of no bytes: the body hash of a GET. */
export const EMPTY_BODY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

export interface SignedRequestFields {
  kid: string;
  /** Unix seconds when the gateway signed. */
  timestamp: number;
  /** Unique per forwarded request: a seller refuses a nonce it has seen. */
  nonce: string;
  method: string;
  /** The path and query the seller receives. */
  pathAndQuery: string;
  bodySha256: string;
  skill: string;
  txHash: string;
  payer: string;
  amount: string;
}

export function requestSigningPayload(f: SignedRequestFields): string {
  return `paygate-request-v1\n${f.kid}\n${f.timestamp}\n${f.nonce}\n${f.method}\n${f.pathAndQuery}\n${f.bodySha256}\n${f.skill}\n${f.txHash}\n${f.payer}\n${f.amount}`;
}

export const FORWARDING_KEY_ID = 'sk';

/** The seller's forwarding key for a secret API key: HMAC-SHA256(key = the sk_… key, "paygate-forwarding-v1"). */
export function forwardingKeyFromApiKey(apiKey: string): Buffer {
  return createHmac('sha256', apiKey).update('paygate-forwarding-v1').digest();
}

/** The `sig` of a `kid=sk` signature: base64url of HMAC-SHA256(forwarding key, payload). */
export function forwardingSignature(forwardingKey: Buffer, payload: string): string {
  return createHmac('sha256', forwardingKey).update(payload).digest('base64url');
}

export interface RequestSignature {
  kid: string;
  timestamp: number;
  nonce: string;
  /** base64url of the raw (IEEE P1363, r‖s) ES256 signature, or of the HMAC-SHA256 for `kid=sk`. */
  signature: string;
  /** `sig_prev` (kid=sk only): the HMAC under the previous API key's forwarding key, during a rotation's overlap. */
  previousSignature?: string;
}

/** `v1; kid=…; t=…; nonce=…; sig=…` (and `; sig_prev=…` during a key rotation's overlap) */
export function formatRequestSignature(s: RequestSignature): string {
  const base = `v1; kid=${s.kid}; t=${s.timestamp}; nonce=${s.nonce}; sig=${s.signature}`;
  return s.previousSignature ? `${base}; sig_prev=${s.previousSignature}` : base;
}

const TOKEN = /^[A-Za-z0-9_-]{1,128}$/;

/** The parsed header, or null when it is not a v1 signature with every field well formed. */
export function parseRequestSignature(value: string | undefined): RequestSignature | null {
  if (!value || value.length > 1024) return null;
  const parts = value.split(';').map((part) => part.trim());
  if (parts[0] !== 'v1') return null;
  const fields = new Map<string, string>();
  for (const part of parts.slice(1)) {
    const at = part.indexOf('=');
    if (at <= 0 || fields.has(part.slice(0, at))) return null;
    fields.set(part.slice(0, at), part.slice(at + 1));
  }
  const [kid, t, nonce, signature] = ['kid', 't', 'nonce', 'sig'].map((name) => fields.get(name));
  if (!kid || !t || !nonce || !signature) return null;
  if (!TOKEN.test(kid) || !TOKEN.test(nonce)) return null;
  const signatureLength = kid === FORWARDING_KEY_ID ? 43 : 86;
  if (signature.length !== signatureLength || !/^[A-Za-z0-9_-]+$/.test(signature)) return null;
  if (!/^\d{1,12}$/.test(t)) return null;
  const previous = fields.get('sig_prev');
  if (previous !== undefined && (kid !== FORWARDING_KEY_ID || !/^[A-Za-z0-9_-]{43}$/.test(previous)))
    return null;
  return {
    kid,
    timestamp: Number(t),
    nonce,
    signature,
    ...(previous ? { previousSignature: previous } : {}),
  };
}
