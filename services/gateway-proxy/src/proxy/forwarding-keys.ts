import { type Bus, requestRpc } from '@paygate/bus';
import { onSellerUpdated } from '@paygate/seller-auth';
import { LRUCache } from 'lru-cache';
import type { Subscription } from 'nats';

/** A seller's HMAC-SHA256 key and, during an API-key rotation's overlap, the previous one until `previousUntilMs`. */
export interface ForwardingKey {
  key: Buffer;
  previous: Buffer | null;
  previousUntilMs: number;
}

interface Entry {
  /** null: none (or the registry did not answer), so its requests are signed ES256. */
  key: ForwardingKey | null;
  /** After this still used, but refreshed in the background. */
  freshUntilMs: number;
}

const REFRESH_AFTER_MS = 60_000;
/** While the registry does not answer: asked again this soon. */
const FAILURE_RETRY_MS = 5_000;

/** In memory only (never logged); `seller.updated` drops an entry, and REFRESH_AFTER_MS covers a missed event. */
export class ForwardingKeys {
  private readonly cache = new LRUCache<string, Entry>({ max: 10_000 });
  private readonly loading = new Map<string, Promise<ForwardingKey | null>>();
  private readonly subscription: Subscription;
  /** An answer asked for before a seller.updated may be the rotated-out key: it serves its waiters but is never kept. */
  private updatesSeen = 0;

  constructor(
    private readonly bus: Bus,
    private readonly options: { timeoutMs: number },
  ) {
    this.subscription = onSellerUpdated(bus, (sellerId) => {
      this.updatesSeen++;
      this.loading.delete(sellerId);
      this.cache.delete(sellerId);
    });
  }

  /** Without waiting: undefined when not learnt yet (call `keyFor`); a stale entry is refreshed in the background. */
  peek(sellerId: string): ForwardingKey | null | undefined {
    const entry = this.cache.get(sellerId);
    if (entry && entry.freshUntilMs < Date.now()) void this.keyFor(sellerId, true);
    return entry?.key;
  }

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
    let freshForMs = REFRESH_AFTER_MS;
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
      // The registry is unreachable: a key already learnt, else ES256 (sellers accept both), asked again soon.
      key = this.cache.get(sellerId)?.key ?? null;
      freshForMs = FAILURE_RETRY_MS;
    }
    if (this.updatesSeen === updatesSeenAtAsk)
      this.cache.set(sellerId, { key, freshUntilMs: Date.now() + freshForMs });
    return key;
  }
}
