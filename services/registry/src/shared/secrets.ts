import { createHash, randomBytes } from 'node:crypto';
import { forwardingKeyFromApiKey } from '@paygate/protocol';
import type { SecretBox } from '@paygate/runtime';
import { verifyMessage } from 'ethers';

/** API keys are 192-bit random strings, so a fast hash (sha256) is the right lookup key: nothing to brute-force. */
export function hashApiKey(apiKey: string): string {
  return createHash('sha256').update(apiKey, 'utf8').digest('hex');
}

export function newApiKey(production: boolean): string {
  return `${production ? 'sk_live_' : 'sk_test_'}${randomBytes(24).toString('base64url')}`;
}

/** The last four characters of a key: enough for a seller to tell its keys apart, never enough to use one. */
export function apiKeyHint(apiKey: string): string {
  return apiKey.slice(-4);
}

/** The gateway signs forwarded requests with this key; the seller derives the same one from its API key. */
export function sealedForwardingKey(box: SecretBox, apiKey: string): string {
  return box.seal(forwardingKeyFromApiKey(apiKey).toString('base64url'));
}

export function newPublishableKey(production: boolean): string {
  return `${production ? 'pk_live_' : 'pk_test_'}${randomBytes(18).toString('base64url')}`;
}

export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`;
}

/** The address whose EIP-191 signature of `message` this is; undefined for a malformed signature. */
export function signerOf(message: string, signature: string): string | undefined {
  try {
    return verifyMessage(message, signature);
  } catch {
    return undefined;
  }
}

export function newId(prefix: string): string {
  return `${prefix}_${randomBytes(12).toString('base64url').replace(/[-_]/g, 'x')}`;
}
