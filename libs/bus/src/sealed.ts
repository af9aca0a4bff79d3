import {
  createCipheriv,
  createDecipheriv,
  createPrivateKey,
  createPublicKey,
  diffieHellman,
  generateKeyPairSync,
  hkdfSync,
  type KeyObject,
  randomBytes,
} from 'node:crypto';
import { BusError } from './errors';

/**
 * Sealing a secret to a one-time X25519 key (ECIES: X25519, HKDF-SHA256, AES-256-GCM): the requester sends the
 * public half of a pair made for this request, so anyone else who sees the reply sees random bytes. The context
 * (the RPC's name) is bound in, so a sealed value cannot be replayed as another RPC's answer.
 */

const SEALED_PREFIX = 'x25519-aes256gcm.';
const BASE64URL_32_BYTES = /^[A-Za-z0-9_-]{43}$/;

export interface ReplyKey {
  /** The raw 32-byte public key, base64url: what travels in the request. */
  publicKey: string;
  privateKey: KeyObject;
}

export class SealedValueError extends BusError {
  override name = 'SealedValueError';
}

/** An X25519 public key in DER (SPKI) is a fixed 12-byte header, then the 32 raw bytes. */
const RAW_X25519_PUBLIC_KEY_BYTES = 32;

/**
 * A fresh X25519 pair (public half raw, base64url). Generated as DER and imported again, so no KeyObject shares
 * its lock with the generation job: Node 20 deadlocks when that job is collected during a JWK export.
 */
export function newReplyKey(): ReplyKey {
  const { publicKey, privateKey } = generateKeyPairSync('x25519', {
    publicKeyEncoding: { type: 'spki', format: 'der' },
    privateKeyEncoding: { type: 'pkcs8', format: 'der' },
  });
  return {
    publicKey: publicKey.subarray(-RAW_X25519_PUBLIC_KEY_BYTES).toString('base64url'),
    privateKey: createPrivateKey({ key: privateKey, format: 'der', type: 'pkcs8' }),
  };
}

export function isReplyPublicKey(value: unknown): value is string {
  return typeof value === 'string' && BASE64URL_32_BYTES.test(value);
}

function importPublicKey(raw: string): KeyObject {
  if (!isReplyPublicKey(raw))
    throw new SealedValueError('reply key must be a base64url X25519 public key (32 bytes)');
  return createPublicKey({ key: { kty: 'OKP', crv: 'X25519', x: raw }, format: 'jwk' });
}

function derivedKey(shared: Buffer, ephemeral: string, recipient: string, context: string): Buffer {
  const salt = Buffer.from(`${ephemeral}.${recipient}`);
  return Buffer.from(hkdfSync('sha256', shared, salt, `paygate sealed reply: ${context}`, 32));
}

/** Seals `plaintext` to the recipient's public key; the result is one ASCII string. */
export function sealTo(recipientPublicKey: string, plaintext: string, context: string): string {
  const recipient = importPublicKey(recipientPublicKey);
  const { publicKey: ephemeralPublic, privateKey } = newReplyKey();
  const shared = diffieHellman({ privateKey, publicKey: recipient });
  const iv = randomBytes(12);
  const key = derivedKey(shared, ephemeralPublic, recipientPublicKey, context);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(context));
  const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()]);
  return `${SEALED_PREFIX}${ephemeralPublic}.${iv.toString('base64url')}.${ciphertext.toString('base64url')}`;
}

/** Opens a value sealed to `replyKey` for `context`; throws SealedValueError when it is not one. */
export function openSealed(replyKey: ReplyKey, sealed: unknown, context: string): string {
  if (typeof sealed !== 'string' || !sealed.startsWith(SEALED_PREFIX)) {
    throw new SealedValueError(`${context}: expected a sealed value in the reply`);
  }
  const [ephemeralPublic, ivText, ciphertextText] = sealed.slice(SEALED_PREFIX.length).split('.');
  const iv = Buffer.from(ivText ?? '', 'base64url');
  const ciphertext = Buffer.from(ciphertextText ?? '', 'base64url');
  if (!ephemeralPublic || iv.length !== 12 || ciphertext.length < 16) {
    throw new SealedValueError(`${context}: malformed sealed value`);
  }
  try {
    const shared = diffieHellman({
      privateKey: replyKey.privateKey,
      publicKey: importPublicKey(ephemeralPublic),
    });
    const key = derivedKey(shared, ephemeralPublic, replyKey.publicKey, context);
    const decipher = createDecipheriv('aes-256-gcm', key, iv);
    decipher.setAAD(Buffer.from(context));
    decipher.setAuthTag(ciphertext.subarray(ciphertext.length - 16));
    return Buffer.concat([
      decipher.update(ciphertext.subarray(0, ciphertext.length - 16)),
      decipher.final(),
    ]).toString('utf8');
  } catch (error) {
    throw new SealedValueError(
      `${context}: the sealed value does not open with this request's key (${(error as Error).message})`,
    );
  }
}
