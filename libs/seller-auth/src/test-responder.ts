import type { Bus } from '@paygate/bus';
import type { Subscription } from 'nats';
import { RESOLVE_API_KEY_RPC, type ResolveApiKeyReply, type SellerIdentity } from './protocol';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Answers the registry's key-resolution RPC from a fixed table. Only for tests of services other than the
 * registry that need a seller before the registry runs; end-to-end tests use the real registry.
 */
export function serveSellersForTests(bus: Bus, sellers: Record<string, SellerIdentity>): Subscription {
  return bus.nc.subscribe(bus.rpcSubject(RESOLVE_API_KEY_RPC), {
    callback: (_error, message) => {
      const { apiKey } = JSON.parse(decoder.decode(message.data)) as { apiKey: string };
      const seller = sellers[apiKey];
      const reply: ResolveApiKeyReply = seller ? { ok: true, seller } : { ok: false, reason: 'unknown_key' };
      message.respond(encoder.encode(JSON.stringify(reply)));
    },
  });
}
