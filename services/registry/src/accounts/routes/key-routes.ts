import { type AnyRoute, defineRoute } from '@paygate/http';
import { requireWalletSession } from '@paygate/seller-auth';
import { currentSeller, sellerRouteAuth } from '../../auth/authenticate';
import type { RegistryContext } from '../../context';
import { NoBody } from '../../shared/schema';
import {
  apiKeyHint,
  hashApiKey,
  newApiKey,
  newPublishableKey,
  newWebhookSecret,
  sealedForwardingKey,
} from '../../shared/secrets';
import { changeCredentials, toAccount } from '../repository';
import {
  Account,
  ApiKeyRename,
  ApiKeyRotated,
  ApiKeyRotateRequest,
  PublishableKeyRotated,
  WebhookSecretRotated,
} from '../schemas';

const HOUR_MS = 60 * 60 * 1000;

/** A new API key for the seller; the replaced one stays valid for the overlap unless revoked at once. */
async function rotateApiKey(
  rc: RegistryContext,
  sellerId: string,
  options: { overlapHours?: number; revokeImmediately?: boolean; name?: string },
) {
  const { ctx, config } = rc;
  const now = config.now();
  const apiKey = newApiKey(config.production);
  const overlapMs =
    options.overlapHours !== undefined ? options.overlapHours * HOUR_MS : config.keyRotationOverlapMs;
  const revokeImmediately = options.revokeImmediately === true || overlapMs === 0;
  const previousExpiresAt = new Date(now.getTime() + overlapMs);
  // Every SellerAuth cache (and the gateway's forwarding keys) drops this seller's entries on this event.
  const updated = await changeCredentials(ctx, sellerId, now, (eb) => ({
    api_key_hash: hashApiKey(apiKey),
    forwarding_key_encrypted: sealedForwardingKey(rc.secrets, apiKey),
    // The key being replaced becomes the one previous key (an older one still in overlap is dropped).
    previous_api_key_hash: revokeImmediately ? null : eb.ref('api_key_hash'),
    previous_api_key_expires_at: revokeImmediately ? null : previousExpiresAt,
    previous_forwarding_key_encrypted: revokeImmediately ? null : eb.ref('forwarding_key_encrypted'),
    previous_api_key_name: revokeImmediately ? null : eb.ref('api_key_name'),
    previous_api_key_hint: revokeImmediately ? null : eb.ref('api_key_hint'),
    previous_api_key_created_at: revokeImmediately ? null : eb.ref('api_key_created_at'),
    previous_api_key_last_used_at: revokeImmediately ? null : eb.ref('api_key_last_used_at'),
    ...(options.name ? { api_key_name: options.name.trim() } : {}),
    api_key_hint: apiKeyHint(apiKey),
    api_key_created_at: now,
    api_key_last_used_at: null,
    api_key_version: eb('api_key_version', '+', 1),
  }));
  return {
    apiKey,
    apiKeyVersion: updated.api_key_version,
    previousKeyExpiresAt: revokeImmediately ? null : previousExpiresAt.toISOString(),
    account: toAccount(updated),
  };
}

/** The account's keys and secrets: the API key (rotate, name), the publishable key and the webhook secret. */
export function keyRoutes(rc: RegistryContext): AnyRoute[] {
  return [
    rotateApiKeyRoute(rc),
    nameApiKeyRoute(rc),
    rotatePublishableKeyRoute(rc),
    rotateWebhookSecretRoute(rc),
  ];
}

function rotateApiKeyRoute(rc: RegistryContext): AnyRoute {
  return defineRoute({
    method: 'post',
    path: '/api/v1/account/api-key/rotate',
    summary:
      'Replace the API key (wallet session only); the old one keeps working for KEY_ROTATION_OVERLAP unless revokeImmediately',
    description:
      'With the sk_ key alone: 403 wallet_session_required. The old key (and the forwarding signature made with it) stays valid until previousKeyExpiresAt, so servers can be moved to the new key; revokeImmediately: true (a leaked key) ends it at once, with any earlier key still in its overlap.',
    auth: sellerRouteAuth(rc),
    body: ApiKeyRotateRequest,
    bodyOptional: true,
    responses: { '200': ApiKeyRotated },
    handler: async (req, res) => {
      requireWalletSession(req.credential, 'rotating the API key');
      res.json(await rotateApiKey(rc, currentSeller(req).id, req.body ?? {}));
    },
  });
}

function nameApiKeyRoute(rc: RegistryContext): AnyRoute {
  return defineRoute({
    method: 'patch',
    path: '/api/v1/account/api-key',
    summary: 'Name the current secret key (say where it is used); the key itself does not change',
    auth: sellerRouteAuth(rc),
    body: ApiKeyRename,
    responses: { '200': Account },
    handler: async (req, res) => {
      const row = await rc.ctx.db
        .updateTable('sellers')
        .set({ api_key_name: req.body.name.trim(), updated_at: rc.config.now() })
        .where('id', '=', currentSeller(req).id)
        .returningAll()
        .executeTakeFirstOrThrow();
      res.json(toAccount(row));
    },
  });
}

function rotatePublishableKeyRoute(rc: RegistryContext): AnyRoute {
  return defineRoute({
    method: 'post',
    path: '/api/v1/account/publishable-key/rotate',
    summary:
      'Replace the publishable key (pk_…; wallet session only); pages using the old one must be updated',
    auth: sellerRouteAuth(rc),
    ...NoBody,
    responses: { '200': PublishableKeyRotated },
    handler: async (req, res) => {
      requireWalletSession(req.credential, 'rotating the publishable key');
      const now = rc.config.now();
      const publishableKey = newPublishableKey(rc.config.production);
      const sellerId = currentSeller(req).id;
      // checkout's projection (and every SellerAuth cache) follows this event.
      await changeCredentials(rc.ctx, sellerId, now, () => ({ publishable_key: publishableKey }));
      res.json({ publishableKey });
    },
  });
}

function rotateWebhookSecretRoute(rc: RegistryContext): AnyRoute {
  return defineRoute({
    method: 'post',
    path: '/api/v1/account/webhook-secret/rotate',
    summary: 'Replace the webhook signing secret (shown once; wallet session only)',
    auth: sellerRouteAuth(rc),
    ...NoBody,
    responses: { '200': WebhookSecretRotated },
    handler: async (req, res) => {
      requireWalletSession(req.credential, 'rotating the webhook secret');
      const now = rc.config.now();
      const secret = newWebhookSecret();
      const sellerId = currentSeller(req).id;
      const updated = await changeCredentials(rc.ctx, sellerId, now, (eb) => ({
        webhook_secret_encrypted: rc.secrets.seal(secret),
        webhook_secret_version: eb('webhook_secret_version', '+', 1),
      }));
      res.json({ webhookSecret: secret, webhookSecretVersion: updated.webhook_secret_version });
    },
  });
}
