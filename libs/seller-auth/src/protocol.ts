import type { RpcReply } from '@paygate/contracts';

/**
 * Who holds an API key: the registry answers `registry.resolve_api_key`, declared with its schemas in
 * @paygate/contracts (RPCS) and called with requestRpc like every RPC.
 */
export { API_KEY_PATTERN, PUBLISHABLE_KEY_PATTERN, SESSION_TOKEN_PATTERN } from '@paygate/contracts';

export type ResolveApiKeyReply = RpcReply<'registry.resolve_api_key'>;
export type SellerIdentity = Extract<ResolveApiKeyReply, { ok: true }>['seller'];
