import { type Bus, requestRpc } from '@paygate/bus';
import { onSellerUpdated } from '@paygate/seller-auth';
import { LRUCache } from 'lru-cache';
import type { Subscription } from 'nats';

/**
 * What a seller's forwarded requests are signed with (HMAC-SHA256): its current key and, during an API-key
 * rotation's overlap, the previous key until `previousUntilMs`, so its origin passes with whichever key it holds.
 */
export interface ForwardingKey {
  key: Buffer;
  previous: Buffer | null;
  previousUntilMs: number;
}

interface Entry {
  /** The key, or null: the seller has none (or the registry did not answer), so its requests are signed ES256. */
  key: ForwardingKey | null;
  /** After this the entry is still used, but refreshed in the background. */
  freshUntilMs: number;
}

interface ForwardingKeysOptions {
  /** Longest wait for the registry's answer. */
  timeoutMs: number;
  /** How long a learnt key (or the absence of one) is used before it is asked again. */
  refreshAfterMs?: number;
  /** How long "the registry did not answer" is kept (requests are signed ES256 meanwhile). */
  failureRetryMs?: number;
  maxEntries?: number;
}

/**
 * Sellers' forwarding keys (the HMAC keys forwarded requests are signed with), asked of the registry by
 * request-reply and kept in memory only (never logged). `seller.updated` (a rotated API key, an ended overlap)
 * drops a seller's entry at once; an entry is also refreshed after `refreshAfterMs` in case that event was missed,
 * and the previous key is never used past its own expiry (RequestSigner checks it).
 */
export class ForwardingKeys {
  private readonly cache: LRUCache<string, Entry>;
  private readonly loading = new Map<string, Promise<ForwardingKey | null>>();
  private readonly subscription: Subscription;
  private readonly refreshAfterMs: number;
  private readonly failureRetryMs: number;
  /**
   * Counts seller.updated events: an answer asked for before one may be the rotated-out key, so it serves the
   * requests that waited for it but is never kept (a key revoked at once was otherwise used until refreshAfterMs).
   */
  private updatesSeen = 0;

  constructor(
    private readonly bus: Bus,
    private readonly options: ForwardingKeysOptions,
  ) {
    this.refreshAfterMs = options.refreshAfterMs ?? 60_000;
    this.failureRetryMs = options.failureRetryMs ?? 5_000;
    this.cache = new LRUCache({ max: options.maxEntries ?? 10_000 });
    this.subscription = onSellerUpdated(bus, (sellerId) => {
      this.updatesSeen++;
      this.loading.delete(sellerId);
      this.cache.delete(sellerId);
    });
  }

  /**
   * Without waiting: the seller's key, null when its requests are signed ES256, undefined when not learnt yet
   * (call `keyFor`). A stale entry is returned and refreshed in the background.
   */
  peek(sellerId: string): ForwardingKey | null | undefined {
    const entry = this.cache.get(sellerId);
    if (entry && entry.freshUntilMs < Date.now()) void this.keyFor(sellerId, true);
    return entry?.key;
  }

  /** The seller's key, asked of the registry unless fresh in memory; null when its requests are signed ES256. */
  async keyFor(sellerId: string, refresh = false): Promise<ForwardingKey | null> {
    const entry = this.cache.get(sellerId);
    if (entry && !refresh && entry.freshUntilMs >= Date.now()) return entry.key;
    const pending = this.loading.get(sellerId);
    if (pending) return pending;
    const loading = this.ask(sellerId).finally(() => {
      if (this.loading.get(sellerId) === loading) this.loading.delete(sellerId);
    });
    this.loading.set(sellerId, loading);
    return loading;
  }

  close(): void {
    this.subscription.unsubscribe();
  }

  private async ask(sellerId: string): Promise<ForwardingKey | null> {
    const updatesSeenAtAsk = this.updatesSeen;
    let key: ForwardingKey | null = null;
    let freshForMs = this.refreshAfterMs;
    try {
      const reply = await requestRpc(
        this.bus,
        'registry.forwarding_key',
        { sellerId },
        { timeoutMs: this.options.timeoutMs },
      );
      if (reply.ok)
        key = {
          key: Buffer.from(reply.key, 'base64url'),
          previous: reply.previousKey ? Buffer.from(reply.previousKey, 'base64url') : null,
          previousUntilMs: reply.previousKeyExpiresAt ? Date.parse(reply.previousKeyExpiresAt) : 0,
        };
    } catch {
      // The registry is unreachable: keep a key already learnt, else sign with ES256 (sellers accept both),
      // and ask again soon.
      key = this.cache.get(sellerId)?.key ?? null;
      freshForMs = this.failureRetryMs;
    }
    if (this.updatesSeen === updatesSeenAtAsk)
      this.cache.set(sellerId, { key, freshUntilMs: Date.now() + freshForMs });
    return key;
  }
}
