import { Type } from '@sinclair/typebox';
import { Address, ClosedObject, Id } from '../primitives';

/** A seller's secret key as written in `Authorization: Bearer sk_…` (the registry compares hashes only). */
export const API_KEY_PATTERN = /^sk_[A-Za-z0-9_-]{16,128}$/;
export const PUBLISHABLE_KEY_PATTERN = /^pk_[A-Za-z0-9_-]{16,128}$/;
/** A dashboard session token (the registry's HS256 JWT), so the browser never has to hold the sk_ key. */
export const SESSION_TOKEN_PATTERN = /^[A-Za-z0-9_-]{8,1024}\.[A-Za-z0-9_-]{8,2048}\.[A-Za-z0-9_-]{16,512}$/;

/** `registry.resolve_api_key`: who holds this secret key, or which seller this valid session token names. */
export const ResolveApiKeyRequest = ClosedObject({
  apiKey: Type.String({
    pattern: `^(?:${API_KEY_PATTERN.source.slice(1, -1)}|${SESSION_TOKEN_PATTERN.source.slice(1, -1)})$`,
  }),
});

export const SellerIdentity = ClosedObject({
  sellerId: Id,
  walletAddress: Address,
  payoutAddress: Address,
  publishableKey: Type.String({ pattern: '^pk_', maxLength: 200 }),
  apiKeyVersion: Type.Integer({ minimum: 0 }),
});

export const ResolveApiKeyReply = Type.Union([
  ClosedObject({ ok: Type.Literal(true), seller: SellerIdentity }),
  ClosedObject({ ok: Type.Literal(false), reason: Type.Literal('unknown_key') }),
]);

export const WebhookSecretRequest = ClosedObject({ sellerId: Id });

export const WebhookSecretReply = Type.Union([
  ClosedObject({
    ok: Type.Literal(true),
    secret: Type.String({ minLength: 1 }),
    version: Type.Integer({ minimum: 0 }),
  }),
  ClosedObject({ ok: Type.Literal(false) }),
]);

/**
 * `registry.forwarding_key`: `ok: false` for an account whose secret key predates forwarding keys (ES256 then).
 * During a key rotation's overlap `previousKey` is the old key's: the gateway signs with both.
 */
export const ForwardingKeyRequest = ClosedObject({ sellerId: Id });

export const ForwardingKeyReply = Type.Union([
  ClosedObject({
    ok: Type.Literal(true),
    key: Type.String({ pattern: '^[A-Za-z0-9_-]{43}$', description: 'base64url of the 32-byte key' }),
    apiKeyVersion: Type.Integer({ minimum: 1 }),
    previousKey: Type.Optional(
      Type.String({ pattern: '^[A-Za-z0-9_-]{43}$', description: 'the old key, during the overlap only' }),
    ),
    previousKeyExpiresAt: Type.Optional(Type.String({ format: 'date-time' })),
  }),
  ClosedObject({ ok: Type.Literal(false) }),
]);
