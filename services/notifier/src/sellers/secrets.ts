import type { Bus } from '@paygate/bus';

/** Request-reply subject (bus.rpcSubject) on which the registry hands out a seller's webhook signing secret. */
export const WEBHOOK_SECRET_RPC = 'registry.webhook_secret';

export interface WebhookSecretRequest {
  sellerId: string;
}
export type WebhookSecretReply = { ok: true; secret: string; version: number } | { ok: false };

export class SecretUnavailableError extends Error {
  override name = 'SecretUnavailableError';
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Fetches sellers' webhook secrets from the registry and caches them by version: `seller.updated` carries
 * only the version number, and a newer version than the cached one triggers a fresh request.
 * Secrets stay in memory only; they are never logged nor stored.
 */
export class WebhookSecrets {
  private readonly cache = new Map<string, { secret: string; version: number }>();

  constructor(
    private readonly bus: Bus,
    private readonly options: { timeoutMs: number; maxEntries?: number },
  ) {}

  async get(sellerId: string, minimumVersion: number): Promise<{ secret: string; version: number }> {
    const cached = this.cache.get(sellerId);
    if (cached && cached.version >= minimumVersion) return cached;
    let reply: WebhookSecretReply;
    try {
      const message = await this.bus.nc.request(
        this.bus.rpcSubject(WEBHOOK_SECRET_RPC),
        encoder.encode(JSON.stringify({ sellerId } satisfies WebhookSecretRequest)),
        { timeout: this.options.timeoutMs },
      );
      reply = JSON.parse(decoder.decode(message.data)) as WebhookSecretReply;
    } catch (error) {
      throw new SecretUnavailableError(
        `registry did not answer the webhook secret request: ${(error as Error).message}`,
      );
    }
    if (!reply.ok || typeof reply.secret !== 'string' || reply.secret.length === 0) {
      throw new SecretUnavailableError('registry has no webhook secret for this seller');
    }
    const entry = { secret: reply.secret, version: reply.version };
    if (this.cache.size >= (this.options.maxEntries ?? 10_000)) this.cache.clear();
    this.cache.set(sellerId, entry);
    return entry;
  }
}
