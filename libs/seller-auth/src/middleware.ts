import { type Bus, requestRpc } from '@paygate/bus';
import { API_KEY_PATTERN, type RpcReply, SESSION_TOKEN_PATTERN } from '@paygate/contracts';
import { bearerToken, HttpError } from '@paygate/http';
import type { NextFunction, Request, Response } from 'express';
import { LRUCache } from 'lru-cache';
import type { Subscription } from 'nats';
import { credentialOf, type SellerCredential } from './wallet-session';

/** Who holds an API key: the registry's answer to `registry.resolve_api_key` (declared in @paygate/contracts). */
export type ResolveApiKeyReply = RpcReply<'registry.resolve_api_key'>;
export type SellerIdentity = Extract<ResolveApiKeyReply, { ok: true }>['seller'];

declare global {
  namespace Express {
    interface Request {
      seller?: SellerIdentity;
      /** How the caller proved it is the seller: the sk_ API key, or the wallet's Sign-In with Ethereum session. */
      credential?: SellerCredential;
    }
  }
}

interface CacheEntry {
  reply: ResolveApiKeyReply;
  expiresAt: number;
}

const decoder = new TextDecoder();

/** Calls `forget(sellerId)` on every `seller.updated`, for in-memory caches (core NATS sees JetStream's too). */
export function onSellerUpdated(bus: Bus, forget: (sellerId: string) => void): Subscription {
  return bus.nc.subscribe(bus.subjectFor('seller.updated'), {
    callback: (_error, message) => {
      try {
        const event = JSON.parse(decoder.decode(message.data)) as { data?: { sellerId?: string } };
        if (event.data?.sellerId) forget(event.data.sellerId);
      } catch {
        // not ours to judge; consumers validate events
      }
    },
  });
}

/**
 * Resolves `Authorization: Bearer sk_…` (or a dashboard session token) to a seller by asking the registry over NATS,
 * caches the answer briefly, and drops a seller's entries as soon as `seller.updated` says its key changed.
 */
export class SellerAuth {
  /** The registry's answer on its way per key: a cold burst asking once per call waited past 2 s (a 503). */
  private readonly inFlight = new Map<string, Promise<CacheEntry>>();
  /** Counts forgetSeller calls: an answer asked before one may predate its change, so only its waiters get it. */
  private forgetCount = 0;
  private readonly subscription: Subscription;
  /** How long a resolved key is trusted without asking again. Rotation drops the entry sooner. */
  private readonly cacheTtlMs: number;
  private readonly cache = new LRUCache<string, CacheEntry>({ max: 10_000 });

  constructor(
    private readonly bus: Bus,
    options: { cacheTtlMs?: number } = {},
  ) {
    this.cacheTtlMs = options.cacheTtlMs ?? 30_000;
    this.subscription = onSellerUpdated(bus, (sellerId) => this.forgetSeller(sellerId));
  }

  forgetSeller(sellerId: string): void {
    this.forgetCount++;
    this.inFlight.clear();
    const stale = [...this.cache.entries()].filter(
      ([, entry]) => entry.reply.ok && entry.reply.seller.sellerId === sellerId,
    );
    for (const [key] of stale) this.cache.delete(key);
  }

  /** Resolves a key; throws HttpError 401 for a malformed or unknown key, 503 when the registry is unreachable. */
  async resolve(apiKey: string): Promise<SellerIdentity> {
    if (!API_KEY_PATTERN.test(apiKey) && !SESSION_TOKEN_PATTERN.test(apiKey)) {
      throw new HttpError(
        401,
        'invalid_api_key',
        'API key is malformed: expected sk_ followed by the key (or a dashboard session token)',
        { field: 'Authorization', rule: 'must be Bearer sk_… or a session token' },
      );
    }
    let entry = this.cache.get(apiKey);
    if (!entry || entry.expiresAt < Date.now()) entry = await this.lookUp(apiKey);
    if (!entry.reply.ok)
      throw new HttpError(
        401,
        'unknown_api_key',
        'API key is not valid (unknown or rotated), or the session expired: sign in again',
      );
    return entry.reply.seller;
  }

  /** One question to the registry per key at a time; its answer is cached. */
  private lookUp(apiKey: string): Promise<CacheEntry> {
    const pending = this.inFlight.get(apiKey);
    if (pending) return pending;
    const asked = this.askRegistry(apiKey).finally(() => {
      if (this.inFlight.get(apiKey) === asked) this.inFlight.delete(apiKey);
    });
    this.inFlight.set(apiKey, asked);
    return asked;
  }

  private async askRegistry(apiKey: string): Promise<CacheEntry> {
    const forgetCountAtAsk = this.forgetCount;
    let reply: ResolveApiKeyReply;
    try {
      reply = await requestRpc(this.bus, 'registry.resolve_api_key', { apiKey }, { timeoutMs: 2000 });
    } catch {
      throw new HttpError(503, 'auth_unavailable', 'cannot verify the API key right now; retry shortly');
    }
    // Unknown keys are cached for a shorter time so a just-created key works at once.
    const entry = { reply, expiresAt: Date.now() + (reply.ok ? this.cacheTtlMs : 1000) };
    if (this.forgetCount === forgetCountAtAsk) this.cache.set(apiKey, entry);
    return entry;
  }

  /** Express middleware: sets req.seller and req.credential, or answers 401. */
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
      req.credential = credentialOf(apiKey);
      next();
    };
  }

  close(): void {
    this.subscription.unsubscribe();
    this.cache.clear();
  }
}
