import type { Bus } from '@paygate/bus';
import { bearerToken, HttpError } from '@paygate/http';
import type { NextFunction, Request, Response } from 'express';
import type { Subscription } from 'nats';
import {
  API_KEY_PATTERN,
  RESOLVE_API_KEY_RPC,
  type ResolveApiKeyReply,
  type ResolveApiKeyRequest,
  type SellerIdentity,
} from './protocol';

// Re-exported for the services that read the bearer token next to SellerAuth.
export { bearerToken };

declare global {
  namespace Express {
    interface Request {
      seller?: SellerIdentity;
    }
  }
}

export interface SellerAuthOptions {
  /** How long a resolved key is trusted without asking again. Rotation drops the entry sooner. */
  cacheTtlMs?: number;
  requestTimeoutMs?: number;
  maxCacheEntries?: number;
}

interface CacheEntry {
  reply: ResolveApiKeyReply;
  expiresAt: number;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Resolves `Authorization: Bearer sk_…` to a seller by asking the registry over NATS request-reply,
 * caches the answer briefly, and drops a seller's entries as soon as `seller.updated` says its key changed.
 */
export class SellerAuth {
  private readonly cache = new Map<string, CacheEntry>();
  private readonly subscription: Subscription;
  readonly options: Required<SellerAuthOptions>;

  constructor(
    private readonly bus: Bus,
    options: SellerAuthOptions = {},
  ) {
    this.options = {
      cacheTtlMs: options.cacheTtlMs ?? 30_000,
      requestTimeoutMs: options.requestTimeoutMs ?? 2000,
      maxCacheEntries: options.maxCacheEntries ?? 10_000,
    };
    // A core subscription also sees events that the registry publishes to JetStream.
    this.subscription = bus.nc.subscribe(bus.subjectFor('seller.updated'), {
      callback: (_error, message) => {
        try {
          const event = JSON.parse(decoder.decode(message.data)) as { data?: { sellerId?: string } };
          if (event.data?.sellerId) this.forgetSeller(event.data.sellerId);
        } catch {
          // not ours to judge; consumers validate events
        }
      },
    });
  }

  forgetSeller(sellerId: string): void {
    for (const [key, entry] of this.cache) {
      if (entry.reply.ok && entry.reply.seller.sellerId === sellerId) this.cache.delete(key);
    }
  }

  /** Resolves a key; throws HttpError 401 for a malformed or unknown key, 503 when the registry is unreachable. */
  async resolve(apiKey: string): Promise<SellerIdentity> {
    if (!API_KEY_PATTERN.test(apiKey)) {
      throw new HttpError(401, 'invalid_api_key', 'API key is malformed: expected sk_ followed by the key', {
        field: 'Authorization',
        rule: 'must be Bearer sk_…',
      });
    }
    const now = Date.now();
    let entry = this.cache.get(apiKey);
    if (!entry || entry.expiresAt < now) {
      let reply: ResolveApiKeyReply;
      try {
        const message = await this.bus.nc.request(
          this.bus.rpcSubject(RESOLVE_API_KEY_RPC),
          encoder.encode(JSON.stringify({ apiKey } satisfies ResolveApiKeyRequest)),
          { timeout: this.options.requestTimeoutMs },
        );
        reply = JSON.parse(decoder.decode(message.data)) as ResolveApiKeyReply;
      } catch {
        throw new HttpError(503, 'auth_unavailable', 'cannot verify the API key right now; retry shortly');
      }
      // Unknown keys are cached for a shorter time so a just-created key works at once.
      entry = { reply, expiresAt: now + (reply.ok ? this.options.cacheTtlMs : 1000) };
      if (this.cache.size >= this.options.maxCacheEntries) this.cache.clear();
      this.cache.set(apiKey, entry);
    }
    if (!entry.reply.ok)
      throw new HttpError(401, 'unknown_api_key', 'API key is not valid (unknown or rotated)');
    return entry.reply.seller;
  }

  /** Express middleware: sets req.seller or answers 401. */
  middleware() {
    return async (req: Request, _res: Response, next: NextFunction) => {
      const apiKey = bearerToken(req);
      if (!apiKey) {
        throw new HttpError(401, 'missing_api_key', 'Authorization header with Bearer sk_… is required', {
          field: 'Authorization',
          rule: 'is required',
        });
      }
      req.seller = await this.resolve(apiKey);
      next();
    };
  }

  close(): void {
    this.subscription.unsubscribe();
    this.cache.clear();
  }
}
