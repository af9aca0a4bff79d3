import { type Bus, requestRpc } from '@paygate/bus';
import { LRUCache } from 'lru-cache';
import { NoWebhookSecretError, SecretUnavailableError } from '../errors';

/** Sellers' webhook secrets from the registry, cached by version (a newer one asks again); memory only. */
export class WebhookSecrets {
  private readonly cache = new LRUCache<string, { secret: string; version: number }>({ max: 10_000 });

  constructor(
    private readonly bus: Bus,
    private readonly options: { timeoutMs: number },
  ) {}

  async get(sellerId: string, minimumVersion: number): Promise<{ secret: string; version: number }> {
    const cached = this.cache.get(sellerId);
    if (cached && cached.version >= minimumVersion) return cached;
    const { timeoutMs } = this.options;
    const reply = await requestRpc(this.bus, 'registry.webhook_secret', { sellerId }, { timeoutMs }).catch(
      (error: Error) => {
        throw new SecretUnavailableError(
          `registry did not answer the webhook secret request: ${error.message}`,
        );
      },
    );
    if (!reply.ok) throw new NoWebhookSecretError(sellerId);
    const entry = { secret: reply.secret, version: reply.version };
    // Two answers can cross: an older version arriving last must not replace a newer one already kept.
    const kept = this.cache.get(sellerId);
    if (!kept || kept.version <= entry.version) this.cache.set(sellerId, entry);
    return entry;
  }
}
