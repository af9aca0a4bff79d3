import type { BackgroundTask } from '@paygate/runtime';
import { API_KEY_PATTERN, RESOLVE_API_KEY_RPC, type ResolveApiKeyReply } from '@paygate/seller-auth';
import type { Msg, Subscription } from 'nats';
import { findSellerByApiKey, findSellerById, toIdentity } from './accounts/repository';
import type { RegistryContext } from './context';

export const WEBHOOK_SECRET_RPC = 'registry.webhook_secret';
export type WebhookSecretReply = { ok: true; secret: string; version: number } | { ok: false };

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const QUEUE = 'registry';

function parse(message: Msg): Record<string, unknown> | undefined {
  try {
    const value = JSON.parse(decoder.decode(message.data));
    return value && typeof value === 'object' ? value : undefined;
  } catch {
    return undefined;
  }
}

/**
 * NATS request-reply responders (queue group: one replica answers each request):
 * - registry.resolve_api_key {apiKey} -> the seller identity, looked up by the key's sha256;
 * - registry.webhook_secret {sellerId} -> the webhook signing secret (notifier signs with it; never in events).
 * On a database error no reply is sent, so callers time out and answer 503 rather than "unknown key".
 */
export function rpcResponders(rc: RegistryContext): BackgroundTask {
  const { ctx } = rc;
  const subscriptions: Subscription[] = [];
  const respond = (message: Msg, reply: unknown) => message.respond(encoder.encode(JSON.stringify(reply)));

  const resolveApiKey = async (message: Msg) => {
    const apiKey = parse(message)?.apiKey;
    if (typeof apiKey !== 'string' || !API_KEY_PATTERN.test(apiKey)) {
      respond(message, { ok: false, reason: 'unknown_key' } satisfies ResolveApiKeyReply);
      return;
    }
    const seller = await findSellerByApiKey(ctx.db, apiKey);
    const reply: ResolveApiKeyReply = seller
      ? { ok: true, seller: toIdentity(seller) }
      : { ok: false, reason: 'unknown_key' };
    respond(message, reply);
  };

  const webhookSecret = async (message: Msg) => {
    const sellerId = parse(message)?.sellerId;
    if (typeof sellerId !== 'string' || sellerId.length > 64) {
      respond(message, { ok: false } satisfies WebhookSecretReply);
      return;
    }
    const seller = await findSellerById(ctx.db, sellerId);
    if (!seller?.webhook_secret_encrypted) {
      respond(message, { ok: false } satisfies WebhookSecretReply);
      return;
    }
    respond(message, {
      ok: true,
      secret: rc.secrets.open(seller.webhook_secret_encrypted),
      version: seller.webhook_secret_version,
    } satisfies WebhookSecretReply);
  };

  const serve = (name: string, handler: (message: Msg) => Promise<void>) =>
    ctx.bus.nc.subscribe(ctx.bus.rpcSubject(name), {
      queue: QUEUE,
      callback: (error, message) => {
        if (error) return;
        handler(message).catch((err) =>
          ctx.logger.warn({ err, rpc: name }, 'rpc handler failed; no reply sent'),
        );
      },
    });

  return {
    start() {
      subscriptions.push(serve(RESOLVE_API_KEY_RPC, resolveApiKey), serve(WEBHOOK_SECRET_RPC, webhookSecret));
    },
    async stop() {
      for (const subscription of subscriptions) subscription.unsubscribe();
      subscriptions.length = 0;
    },
  };
}
