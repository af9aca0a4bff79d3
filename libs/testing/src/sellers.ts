import { type Bus, type RpcServer, serveRpc } from '@paygate/bus';
import type { ResolveApiKeyReply, SellerIdentity } from '@paygate/seller-auth';

const quiet = { warn: () => undefined, error: () => undefined };

/**
 * Answers the registry's key-resolution RPC from a fixed table. Only for tests of services other than the
 * registry that need a seller before the registry runs; end-to-end tests use the real registry.
 */
export function serveSellersForTests(bus: Bus, sellers: Record<string, SellerIdentity>): Promise<RpcServer> {
  return serveRpc(
    bus,
    'registry.resolve_api_key',
    async ({ apiKey }): Promise<ResolveApiKeyReply> => {
      const seller = sellers[apiKey];
      return seller ? { ok: true, seller } : { ok: false, reason: 'unknown_key' };
    },
    quiet,
  );
}

/**
 * Answers the registry's forwarding-key RPC from a fixed table of sellerId → forwarding key (derive it with
 * `forwardingKeyFromApiKey` of @paygate/agent-client); sellers not in it have none (the gateway signs ES256).
 */
export function serveForwardingKeysForTests(
  bus: Bus,
  keys: Record<string, Buffer | { key: Buffer; previous: Buffer; previousExpiresAt: Date }>,
): Promise<RpcServer> {
  return serveRpc(
    bus,
    'registry.forwarding_key',
    async ({ sellerId }) => {
      const entry = keys[sellerId];
      if (!entry) return { ok: false };
      if (Buffer.isBuffer(entry)) return { ok: true, key: entry.toString('base64url'), apiKeyVersion: 1 };
      // During a key rotation's overlap (the registry's previous key).
      return {
        ok: true,
        key: entry.key.toString('base64url'),
        apiKeyVersion: 2,
        previousKey: entry.previous.toString('base64url'),
        previousKeyExpiresAt: entry.previousExpiresAt.toISOString(),
      };
    },
    quiet,
  );
}
