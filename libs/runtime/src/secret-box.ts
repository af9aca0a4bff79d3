import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { SealedSecretError } from './errors';

/**
 * Secrets a service must read back, sealed with AES-256-GCM under a key derived from the key material and the
 * purpose: a leaked table alone reveals nothing, and one purpose's key opens nothing of another's.
 */
export class SecretBox {
  private readonly key: Buffer;

  /** `purpose` separates keys derived from the same material (e.g. 'paygate-registry-secrets'). */
  constructor(material: string, purpose: string) {
    this.key = createHash('sha256').update(`${purpose}:${material}`).digest();
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

  /** Throws when the value was not sealed by this box (another key, or altered). */
  open(sealed: string): string {
    const [version, iv, tag, body] = sealed.split('.');
    if (version !== 'v1' || !iv || !tag || body === undefined)
      throw new SealedSecretError('unknown sealed secret format');
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString(
      'utf8',
    );
  }
}
