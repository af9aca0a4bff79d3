import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { forwardingKeyFromApiKey } from '@paygate/agent-client';

/** API keys are 192-bit random strings, so a fast hash (sha256) is the right lookup key: nothing to brute-force. */
export function hashApiKey(apiKey: string): string {
  return createHash('sha256').update(apiKey, 'utf8').digest('hex');
}

export function newApiKey(production: boolean): string {
  return `${production ? 'sk_live_' : 'sk_test_'}${randomBytes(24).toString('base64url')}`;
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

export function newId(prefix: string): string {
  return `${prefix}_${randomBytes(12).toString('base64url').replace(/[-_]/g, 'x')}`;
}

/**
 * Webhook secrets must be readable (notifier signs with them), so they are stored encrypted with
 * AES-256-GCM under a key derived from SECRETS_ENCRYPTION_KEY: a leaked table alone reveals nothing.
 */
export class SecretBox {
  private readonly key: Buffer;
  constructor(material: string) {
    this.key = createHash('sha256').update(`paygate-registry-secrets:${material}`).digest();
  }

  seal(plain: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return [
      'v1',
      iv.toString('base64url'),
      cipher.getAuthTag().toString('base64url'),
      body.toString('base64url'),
    ].join('.');
  }

  open(sealed: string): string {
    const [version, iv, tag, body] = sealed.split('.');
    if (version !== 'v1' || !iv || !tag || body === undefined)
      throw new Error('unknown sealed secret format');
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString(
      'utf8',
    );
  }
}
