import { createPublicKey, type KeyObject } from 'node:crypto';
import { type PaygateApi, PaygateUnavailableError } from './paygate-api';

const JWKS_TTL_MS = 10 * 60_000;
const JWKS_MIN_REFETCH_MS = 30_000;

/** Paygate's ES256 keys by kid, cached 10 minutes, refetched (at most every 30 s) for an unknown kid (rotation). */
export class JwksKeys {
  private keys = new Map<string, KeyObject>();
  private fetchedAt = 0;

  constructor(private readonly api: PaygateApi) {}

  /** The key, or undefined when Paygate does not publish it; PaygateUnavailableError when it cannot be asked. */
  async key(kid: string): Promise<KeyObject | undefined> {
    await this.load(false);
    if (!this.keys.has(kid)) await this.load(true);
    return this.keys.get(kid);
  }

  private async load(force: boolean): Promise<void> {
    const age = Date.now() - this.fetchedAt;
    if (age < (force ? JWKS_MIN_REFETCH_MS : JWKS_TTL_MS)) return;
    const res = await this.api.request('/.well-known/jwks.json');
    if (!res.ok) throw new PaygateUnavailableError(`Paygate answered ${res.status} for its JWKS`);
    const { keys } = (await res.json()) as {
      keys: Array<{ kid: string; kty: string; crv: string; x: string; y: string }>;
    };
    const next = new Map<string, KeyObject>();
    for (const { kid, kty, crv, x, y } of keys) {
      if (kty !== 'EC' || crv !== 'P-256' || !kid) continue;
      next.set(kid, createPublicKey({ key: { kty, crv, x, y }, format: 'jwk' }));
    }
    this.keys = next;
    this.fetchedAt = Date.now();
  }
}
