/**
 * The request-reply protocol by which any service asks the registry who holds an API key.
 * Subject: bus.rpcSubject(RESOLVE_API_KEY_RPC). The key travels over NATS inside the cluster (TLS in
 * production); the registry hashes it and compares hashes, never storing it in clear.
 */
export const RESOLVE_API_KEY_RPC = 'registry.resolve_api_key';

export interface ResolveApiKeyRequest {
  apiKey: string;
}

export interface SellerIdentity {
  sellerId: string;
  walletAddress: string;
  payoutAddress: string;
  publishableKey: string;
  apiKeyVersion: number;
}

export type ResolveApiKeyReply = { ok: true; seller: SellerIdentity } | { ok: false; reason: 'unknown_key' };

export const API_KEY_PATTERN = /^sk_[A-Za-z0-9_-]{16,128}$/;
export const PUBLISHABLE_KEY_PATTERN = /^pk_[A-Za-z0-9_-]{16,128}$/;
