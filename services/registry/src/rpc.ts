import { type RpcServer, serveRpcs } from '@paygate/bus';
import type { BackgroundTask } from '@paygate/runtime';
import { findSellerById, toIdentity } from './accounts/repository';
import { sellerOfApiKey, sellerOfSession } from './auth/authenticate';
import type { RegistryContext } from './context';
import { RegistryReason } from './reasons';

/**
 * The registry's RPCs (declared in @paygate/contracts): resolve_api_key, webhook_secret, forwarding_key. A
 * database error is a service error, so callers answer 503 rather than "unknown key".
 */
export function rpcResponders(rc: RegistryContext): BackgroundTask {
  const { ctx } = rc;
  let server: RpcServer | undefined;
  return {
    async start() {
      server = await serveRpcs(
        ctx.bus,
        'registry',
        {
          'registry.resolve_api_key': async ({ apiKey }) => {
            const seller = apiKey.startsWith('sk_')
              ? await sellerOfApiKey(rc, apiKey)
              : await sellerOfSession(rc, apiKey);
            return seller && seller !== 'signed_out'
              ? { ok: true, seller: toIdentity(seller) }
              : { ok: false, reason: RegistryReason.UnknownKey };
          },
          'registry.webhook_secret': async ({ sellerId }) => {
            const seller = await findSellerById(ctx.db, sellerId);
            if (!seller?.webhook_secret_encrypted) return { ok: false };
            return {
              ok: true,
              secret: rc.secrets.open(seller.webhook_secret_encrypted),
              version: seller.webhook_secret_version,
            };
          },
          'registry.forwarding_key': async ({ sellerId }) => {
            const seller = await findSellerById(ctx.db, sellerId);
            if (!seller?.forwarding_key_encrypted) return { ok: false };
            // During a rotation's overlap the old key's forwarding key too: the gateway signs with both.
            const previousExpiresAt = seller.previous_api_key_expires_at;
            const overlap =
              seller.previous_forwarding_key_encrypted &&
              previousExpiresAt &&
              new Date(previousExpiresAt).getTime() > rc.config.now().getTime();
            return {
              ok: true,
              key: rc.secrets.open(seller.forwarding_key_encrypted),
              apiKeyVersion: seller.api_key_version,
              ...(overlap
                ? {
                    previousKey: rc.secrets.open(seller.previous_forwarding_key_encrypted!),
                    previousKeyExpiresAt: new Date(previousExpiresAt).toISOString(),
                  }
                : {}),
            };
          },
        },
        ctx.logger,
      );
    },
    async stop() {
      await server?.stop();
      server = undefined;
    },
  };
}
