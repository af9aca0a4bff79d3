import { randomBytes } from 'node:crypto';
import { type AnyRoute, defineRoute, HttpError } from '@paygate/http';
import { parseUsdc } from '@paygate/money';
import { verifyMessage } from 'ethers';
import { sql } from 'kysely';
import { SiweMessage } from 'siwe';
import { currentSeller, requireWalletSession, sellerRouteAuth } from '../auth/authenticate';
import { issueSessionToken } from '../auth/sessions';
import type { RegistryContext } from '../context';
import { EmptyBody } from '../shared/schema';
import {
  apiKeyHint,
  hashApiKey,
  newApiKey,
  newId,
  newPublishableKey,
  newWebhookSecret,
  sealedForwardingKey,
} from '../shared/secrets';
import { checkSellerUrl } from '../shared/urls';
import { parsePayoutChangeMessage, payoutChangeMessage } from './payout-change';
import { publishPayoutChangeRequested, publishSellerUpdated, toAccount } from './repository';
import {
  Account,
  AccountPatch,
  AccountPatchResponse,
  ApiKeyRename,
  ApiKeyRotated,
  ApiKeyRotateRequest,
  NonceResponse,
  PayoutChallenge,
  PayoutChallengeRequest,
  PayoutChangeRequest,
  PayoutChangeResponse,
  PublishableKeyRotated,
  SignOutResponse,
  VerifyRequest,
  VerifyResponse,
  WebhookSecretRotated,
} from './schemas';

const HOUR_MS = 60 * 60 * 1000;

const siweRefused = (code: string, message: string) =>
  new HttpError(401, code, message, {
    field: 'message',
    rule: 'must be a fresh sign-in message for this domain',
  });

function parseSiwe(text: string): SiweMessage {
  try {
    return new SiweMessage(text);
  } catch {
    throw new HttpError(400, 'invalid_request', 'message is not an EIP-4361 sign-in message', {
      field: 'message',
      rule: 'must be an EIP-4361 (Sign-In with Ethereum) message',
    });
  }
}

/** The origin a SIWE message's URI must have: PUBLIC_BASE_URL's (a message made for another site is refused). */
function sameOrigin(uri: string, expected: string): boolean {
  try {
    return new URL(uri).origin === new URL(expected).origin;
  } catch {
    return false;
  }
}

/** A payout address is never the zero address (a payout there burns the money) nor Paygate's escrow wallet. */
function checkPayoutAddress(address: string, escrowAddress: string | null, field: string): void {
  if (/^0x0{40}$/i.test(address)) {
    throw new HttpError(400, 'invalid_request', `${field} must not be the zero address`, {
      field,
      rule: 'must not be the zero address',
    });
  }
  // A payout to the escrow wallet never leaves it: the seller would be marked settled and paid nothing.
  if (escrowAddress !== null && address.toLowerCase() === escrowAddress) {
    throw new HttpError(400, 'invalid_request', `${field} must not be Paygate's escrow address`, {
      field,
      rule: "must not be Paygate's escrow address",
    });
  }
}

const payoutChangeRefused = (code: string, message: string) =>
  new HttpError(401, code, message, {
    field: 'message',
    rule: "must be a fresh payout-address challenge for this account, signed by the account's wallet",
  });

/** Sign-in (SIWE), the account and its keys. */
export function accountRoutes(rc: RegistryContext): AnyRoute[] {
  const { ctx, config } = rc;
  const auth = sellerRouteAuth(rc);
  return [
    defineRoute({
      method: 'post',
      path: '/api/v1/auth/siwe/nonce',
      summary: 'Get a single-use SIWE nonce (valid 5 minutes)',
      body: EmptyBody,
      bodyOptional: true,
      responses: { '201': NonceResponse },
      handler: async (_req, res) => {
        const now = config.now();
        // Alphanumeric, as EIP-4361 requires; 128 bits.
        const nonce = randomBytes(16).toString('hex');
        const expiresAt = new Date(now.getTime() + config.siweNonceTtlMs);
        await ctx.db.insertInto('siwe_nonces').values({ nonce, expires_at: expiresAt }).execute();
        // Expired nonces are swept as new ones are made (bounded).
        await sql`delete from siwe_nonces where nonce in (select nonce from siwe_nonces where expires_at < ${now} limit 100)`.execute(
          ctx.db,
        );
        res.status(201).json({
          nonce,
          expiresAt: expiresAt.toISOString(),
          domain: rc.siweDomain,
          uri: config.publicBaseUrl,
          chainId: config.chainId,
        });
      },
    }),

    defineRoute({
      method: 'post',
      path: '/api/v1/auth/siwe/verify',
      summary:
        'Sign in with Ethereum; the first login creates the account and returns the API key once (201)',
      body: VerifyRequest,
      responses: {
        '200': { description: 'signed in', schema: VerifyResponse },
        '201': {
          description: 'first login: the account is created, apiKey is shown once',
          schema: VerifyResponse,
        },
      },
      errors: { '401': 'refused sign-in: domain, signature, expiry or nonce (error.code says which)' },
      handler: async (req, res) => {
        const body = req.body;
        const now = config.now();
        const message = parseSiwe(body.message);
        if (message.domain !== rc.siweDomain) {
          throw siweRefused(
            'siwe_domain_mismatch',
            `sign-in message is for ${message.domain}, expected ${rc.siweDomain}`,
          );
        }
        // The URI and chain are part of what the wallet agreed to: a message made for another site (same host
        // name, other scheme or port) or another chain is not a sign-in here.
        if (!sameOrigin(message.uri, config.publicBaseUrl)) {
          throw siweRefused(
            'siwe_uri_mismatch',
            `sign-in message is for URI ${message.uri}, expected ${config.publicBaseUrl}`,
          );
        }
        if (message.chainId !== config.chainId) {
          throw siweRefused(
            'siwe_chain_mismatch',
            `sign-in message is for chain ${message.chainId}, expected ${config.chainId}`,
          );
        }
        let recovered: string | undefined;
        try {
          recovered = verifyMessage(message.prepareMessage(), body.signature);
        } catch {
          recovered = undefined;
        }
        if (!recovered || recovered !== message.address) {
          throw new HttpError(
            401,
            'siwe_invalid_signature',
            'signature does not match the address of the message',
            {
              field: 'signature',
              rule: 'must be the signature of the message by its address',
            },
          );
        }
        const verdict = await message.verify(
          { signature: body.signature, domain: rc.siweDomain, time: now.toISOString() },
          { suppressExceptions: true },
        );
        if (!verdict.success) {
          const reason = String(verdict.error?.type ?? 'refused');
          throw siweRefused(
            reason.startsWith('Expired') ? 'siwe_expired' : 'siwe_refused',
            `sign-in refused: ${reason}`,
          );
        }
        if (message.issuedAt && new Date(message.issuedAt).getTime() > now.getTime() + 5 * 60_000) {
          throw siweRefused('siwe_refused', 'sign-in message is issued in the future');
        }

        const result = await ctx.inTransaction(async (trx) => {
          // Single use across replicas: the delete that finds the row wins.
          const consumed = await trx
            .deleteFrom('siwe_nonces')
            .where('nonce', '=', message.nonce)
            .where('expires_at', '>', now)
            .returning('nonce')
            .executeTakeFirst();
          if (!consumed)
            throw siweRefused(
              'siwe_nonce_invalid',
              'nonce is unknown, expired or already used; ask for a new one',
            );

          const existing = await trx
            .selectFrom('sellers')
            .selectAll()
            .where(sql<string>`lower(wallet_address)`, '=', message.address.toLowerCase())
            .executeTakeFirst();
          if (existing) return { seller: existing, apiKey: undefined };
          await rc.signInLimits.countNewAccount(req, res);

          const apiKey = newApiKey(config.production);
          const inserted = await trx
            .insertInto('sellers')
            .values({
              id: newId('sel'),
              wallet_address: message.address,
              payout_address: message.address,
              api_key_hash: hashApiKey(apiKey),
              api_key_hint: apiKeyHint(apiKey),
              api_key_created_at: now,
              forwarding_key_encrypted: sealedForwardingKey(rc.secrets, apiKey),
              publishable_key: newPublishableKey(config.production),
              webhook_url: null,
              webhook_secret_encrypted: null,
              created_at: now,
              updated_at: now,
            })
            .onConflict((oc) => oc.doNothing())
            .returningAll()
            .executeTakeFirst();
          if (!inserted) {
            // A concurrent first login of the same wallet created the account; this login just signs in.
            const winner = await trx
              .selectFrom('sellers')
              .selectAll()
              .where(sql<string>`lower(wallet_address)`, '=', message.address.toLowerCase())
              .executeTakeFirstOrThrow();
            return { seller: winner, apiKey: undefined };
          }
          await publishSellerUpdated(trx, inserted, now);
          return { seller: inserted, apiKey };
        });

        const session = await issueSessionToken(
          result.seller.id,
          config.sessionSecret,
          now,
          config.sessionTtlMs,
        );
        res.status(result.apiKey ? 201 : 200).json({
          sessionToken: session.token,
          expiresAt: session.expiresAt.toISOString(),
          seller: toAccount(result.seller),
          ...(result.apiKey ? { apiKey: result.apiKey } : {}),
          publishableKey: result.seller.publishable_key,
        });
      },
    }),

    defineRoute({
      method: 'post',
      path: '/api/v1/auth/sign-out',
      summary:
        'Sign out: every dashboard session of this seller issued until now stops working (on every device)',
      description:
        'With a session token or the sk_ key. Later requests with an earlier session token are 401 invalid_session, here and at every other Paygate service (they follow seller.updated). The API keys are not affected.',
      auth,
      body: EmptyBody,
      bodyOptional: true,
      responses: { '200': SignOutResponse },
      handler: async (req, res) => {
        const now = config.now();
        const sellerId = currentSeller(req).id;
        await ctx.inTransaction(async (trx) => {
          const row = await trx
            .updateTable('sellers')
            .set((eb) => ({ sessions_revoked_at: now, revision: eb('revision', '+', 1), updated_at: now }))
            .where('id', '=', sellerId)
            .returningAll()
            .executeTakeFirstOrThrow();
          // Every SellerAuth cache drops the seller's resolved sessions on this event.
          await publishSellerUpdated(trx, row, now);
        });
        res.json({ signedOut: true, sessionsRevokedAt: now.toISOString() });
      },
    }),

    defineRoute({
      method: 'get',
      path: '/api/v1/account',
      summary: 'The account and its settings',
      auth,
      responses: { '200': Account },
      handler: (req, res) => {
        res.json(toAccount(currentSeller(req)));
      },
    }),

    defineRoute({
      method: 'patch',
      path: '/api/v1/account',
      summary: 'Change the webhook URL (wallet session only), settlement frequency or minimum settlement',
      description:
        'payoutAddress is refused here (403 wallet_signature_required): it changes through POST /api/v1/account/payout-address with a signature by the account wallet. webhookUrl needs the wallet session (403 wallet_session_required with the sk_ key).',
      auth,
      body: AccountPatch,
      responses: { '200': AccountPatchResponse },
      handler: async (req, res) => {
        const body = req.body;
        const now = config.now();
        // The payout address decides where the money goes: only a fresh signature by the account wallet moves
        // it (a stolen session token or API key must not), through its own route.
        if (body.payoutAddress !== undefined) {
          throw new HttpError(
            403,
            'wallet_signature_required',
            'changing the payout address needs a fresh signature by the account wallet: POST /api/v1/account/payout-address/challenge { payoutAddress }, sign the message with the wallet, then POST /api/v1/account/payout-address { message, signature }',
            { field: 'payoutAddress', rule: 'must be changed with a signature by the account wallet' },
          );
        }
        // Webhooks carry the seller's payment events (and announce payout changes): the wallet's session only.
        if (body.webhookUrl !== undefined) requireWalletSession(req, 'changing the webhook URL');
        let minimumSettlementMicro: bigint | undefined;
        if (body.minimumSettlement !== undefined) {
          try {
            minimumSettlementMicro = parseUsdc(body.minimumSettlement);
          } catch (error) {
            throw new HttpError(
              400,
              'invalid_request',
              `minimumSettlement ${(error as { rule?: string }).rule ?? 'is invalid'}`,
              {
                field: 'minimumSettlement',
                rule: (error as { rule?: string }).rule ?? 'must be a decimal USDC amount',
              },
            );
          }
        }
        const webhookUrl =
          body.webhookUrl === undefined || body.webhookUrl === null
            ? body.webhookUrl
            : await checkSellerUrl('webhookUrl', body.webhookUrl, {
                production: config.production,
                resolve: rc.resolveHost,
              });
        const sellerId = currentSeller(req).id;
        const result = await ctx.inTransaction(async (trx) => {
          const current = await trx
            .selectFrom('sellers')
            .selectAll()
            .where('id', '=', sellerId)
            .forUpdate()
            .executeTakeFirstOrThrow();
          // The signing secret is created with the first webhook URL, and shown once.
          const webhookSecret =
            webhookUrl && !current.webhook_secret_encrypted ? newWebhookSecret() : undefined;
          const updated = await trx
            .updateTable('sellers')
            .set((eb) => ({
              ...(webhookUrl !== undefined ? { webhook_url: webhookUrl } : {}),
              ...(body.settlementFrequency !== undefined
                ? { settlement_frequency: body.settlementFrequency }
                : {}),
              ...(minimumSettlementMicro !== undefined
                ? { minimum_settlement_micro: minimumSettlementMicro }
                : {}),
              ...(webhookSecret
                ? {
                    webhook_secret_encrypted: rc.secrets.seal(webhookSecret),
                    webhook_secret_version: eb('webhook_secret_version', '+', 1),
                  }
                : {}),
              revision: eb('revision', '+', 1),
              updated_at: now,
            }))
            .where('id', '=', sellerId)
            .returningAll()
            .executeTakeFirstOrThrow();
          await publishSellerUpdated(trx, updated, now);
          return { updated, webhookSecret };
        });
        res.json({
          account: toAccount(result.updated),
          ...(result.webhookSecret ? { webhookSecret: result.webhookSecret } : {}),
        });
      },
    }),

    defineRoute({
      method: 'post',
      path: '/api/v1/account/payout-address/challenge',
      summary: 'Get the message the account wallet signs to change the payout address (single use)',
      description:
        'The message names this Paygate, the account, the wallet, the new address, the chain id, a single-use nonce and its expiry (PAYOUT_CHALLENGE_TTL). Sign it with the account wallet (EIP-191 personal_sign) and send it to POST /api/v1/account/payout-address.',
      auth,
      body: PayoutChallengeRequest,
      responses: { '201': PayoutChallenge },
      handler: async (req, res) => {
        const now = config.now();
        const seller = currentSeller(req);
        checkPayoutAddress(req.body.payoutAddress, config.escrowAddress, 'payoutAddress');
        const nonce = randomBytes(16).toString('hex');
        const expiresAt = new Date(now.getTime() + config.payoutChallengeTtlMs);
        await ctx.db.insertInto('siwe_nonces').values({ nonce, expires_at: expiresAt }).execute();
        // Expired nonces are swept as new ones are made (bounded), as for sign-in.
        await sql`delete from siwe_nonces where nonce in (select nonce from siwe_nonces where expires_at < ${now} limit 100)`.execute(
          ctx.db,
        );
        const message = payoutChangeMessage({
          domain: rc.siweDomain,
          walletAddress: seller.wallet_address,
          sellerId: seller.id,
          newPayoutAddress: req.body.payoutAddress,
          chainId: config.chainId,
          nonce,
          issuedAt: now,
          expiresAt,
        });
        res.status(201).json({
          message,
          walletAddress: seller.wallet_address,
          chainId: config.chainId,
          expiresAt: expiresAt.toISOString(),
          delaySeconds: Math.ceil(config.payoutAddressDelayMs / 1000),
        });
      },
    }),

    defineRoute({
      method: 'post',
      path: '/api/v1/account/payout-address',
      summary:
        'Change the payout address with a signature by the account wallet; announced by webhook, effective after PAYOUT_ADDRESS_DELAY',
      description:
        'The message is one issued by POST /api/v1/account/payout-address/challenge for this account, unexpired and unused, signed by the account wallet. Until effectiveAt payouts keep going to the current address (account.payoutAddress); the pending change is account.pendingPayoutAddress and goes out as the webhook seller.payout_address_change_requested.',
      auth,
      body: PayoutChangeRequest,
      responses: { '200': PayoutChangeResponse },
      errors: {
        '401':
          'refused: not this account or wallet, another domain or chain, expired, used, or not signed by the account wallet (error.code says which)',
      },
      handler: async (req, res) => {
        const now = config.now();
        const seller = currentSeller(req);
        const fields = parsePayoutChangeMessage(req.body.message);
        if (!fields)
          throw new HttpError(
            400,
            'invalid_request',
            'message is not a payout-address change issued by /api/v1/account/payout-address/challenge',
            { field: 'message', rule: 'must be the challenge message exactly as issued' },
          );
        if (fields.domain !== rc.siweDomain)
          throw payoutChangeRefused(
            'payout_change_domain_mismatch',
            `the message is for ${fields.domain}, expected ${rc.siweDomain}`,
          );
        if (fields.sellerId !== seller.id)
          throw payoutChangeRefused('payout_change_wrong_account', 'the message is for another account');
        if (fields.walletAddress.toLowerCase() !== seller.wallet_address.toLowerCase())
          throw payoutChangeRefused(
            'payout_change_wrong_wallet',
            "the message names another wallet than the account's",
          );
        if (fields.chainId !== config.chainId)
          throw payoutChangeRefused(
            'payout_change_chain_mismatch',
            `the message is for chain ${fields.chainId}, expected ${config.chainId}`,
          );
        if (
          fields.expiresAt.getTime() <= now.getTime() ||
          fields.expiresAt.getTime() - fields.issuedAt.getTime() > config.payoutChallengeTtlMs ||
          fields.issuedAt.getTime() > now.getTime() + 5 * 60_000
        )
          throw payoutChangeRefused('payout_change_expired', 'the message expired: ask for a new challenge');
        let signer: string | undefined;
        try {
          signer = verifyMessage(req.body.message, req.body.signature);
        } catch {
          signer = undefined;
        }
        if (signer?.toLowerCase() !== seller.wallet_address.toLowerCase())
          throw new HttpError(
            401,
            'wallet_signature_invalid',
            "the signature is not by the account's wallet",
            { field: 'signature', rule: "must be the account wallet's signature of the message" },
          );
        checkPayoutAddress(fields.newPayoutAddress, config.escrowAddress, 'message');

        const effectiveAt = new Date(now.getTime() + config.payoutAddressDelayMs);
        const updated = await ctx.inTransaction(async (trx) => {
          // Single use: the delete that finds the nonce wins (a replayed signature finds none).
          const consumed = await trx
            .deleteFrom('siwe_nonces')
            .where('nonce', '=', fields.nonce)
            .where('expires_at', '>', now)
            .returning('nonce')
            .executeTakeFirst();
          if (!consumed)
            throw payoutChangeRefused(
              'payout_change_nonce_invalid',
              'the challenge is unknown, expired or already used; ask for a new one',
            );
          const current = await trx
            .selectFrom('sellers')
            .select('payout_address')
            .where('id', '=', seller.id)
            .forUpdate()
            .executeTakeFirstOrThrow();
          const immediate = config.payoutAddressDelayMs === 0;
          const row = await trx
            .updateTable('sellers')
            .set((eb) => ({
              ...(immediate
                ? {
                    payout_address: fields.newPayoutAddress,
                    pending_payout_address: null,
                    pending_payout_effective_at: null,
                    revision: eb('revision', '+', 1),
                  }
                : {
                    pending_payout_address: fields.newPayoutAddress,
                    pending_payout_effective_at: effectiveAt,
                  }),
              updated_at: now,
            }))
            .where('id', '=', seller.id)
            .returningAll()
            .executeTakeFirstOrThrow();
          // Settlement learns the payout address from seller.updated only: sent when the change takes effect.
          if (immediate) await publishSellerUpdated(trx, row, now);
          await publishPayoutChangeRequested(trx, row, current.payout_address, fields.newPayoutAddress, {
            requestedAt: now,
            effectiveAt,
          });
          return row;
        });
        res.json({ account: toAccount(updated), effectiveAt: effectiveAt.toISOString() });
      },
    }),

    defineRoute({
      method: 'post',
      path: '/api/v1/account/payout-address/cancel',
      summary: 'Cancel a pending payout-address change (wallet session only)',
      auth,
      body: EmptyBody,
      bodyOptional: true,
      responses: { '200': Account },
      handler: async (req, res) => {
        requireWalletSession(req, 'cancelling a payout-address change');
        const now = config.now();
        const row = await ctx.db
          .updateTable('sellers')
          .set({ pending_payout_address: null, pending_payout_effective_at: null, updated_at: now })
          .where('id', '=', currentSeller(req).id)
          .returningAll()
          .executeTakeFirstOrThrow();
        res.json(toAccount(row));
      },
    }),

    defineRoute({
      method: 'post',
      path: '/api/v1/account/api-key/rotate',
      summary:
        'Replace the API key (wallet session only); the old one keeps working for KEY_ROTATION_OVERLAP unless revokeImmediately',
      description:
        'With the sk_ key alone: 403 wallet_session_required. The old key (and the forwarding signature made with it) stays valid until previousKeyExpiresAt, so servers can be moved to the new key; revokeImmediately: true (a leaked key) ends it at once, with any earlier key still in its overlap.',
      auth,
      body: ApiKeyRotateRequest,
      bodyOptional: true,
      responses: { '200': ApiKeyRotated },
      handler: async (req, res) => {
        requireWalletSession(req, 'rotating the API key');
        const now = config.now();
        const apiKey = newApiKey(config.production);
        const sellerId = currentSeller(req).id;
        const overlapMs =
          req.body?.overlapHours !== undefined
            ? req.body.overlapHours * HOUR_MS
            : config.keyRotationOverlapMs;
        const revokeImmediately = req.body?.revokeImmediately === true || overlapMs === 0;
        const previousExpiresAt = new Date(now.getTime() + overlapMs);
        const updated = await ctx.inTransaction(async (trx) => {
          const row = await trx
            .updateTable('sellers')
            .set((eb) => ({
              api_key_hash: hashApiKey(apiKey),
              forwarding_key_encrypted: sealedForwardingKey(rc.secrets, apiKey),
              // The key being replaced becomes the one previous key (an older one still in overlap is dropped).
              previous_api_key_hash: revokeImmediately ? null : eb.ref('api_key_hash'),
              previous_api_key_expires_at: revokeImmediately ? null : previousExpiresAt,
              previous_forwarding_key_encrypted: revokeImmediately
                ? null
                : eb.ref('forwarding_key_encrypted'),
              previous_api_key_name: revokeImmediately ? null : eb.ref('api_key_name'),
              previous_api_key_hint: revokeImmediately ? null : eb.ref('api_key_hint'),
              previous_api_key_created_at: revokeImmediately ? null : eb.ref('api_key_created_at'),
              previous_api_key_last_used_at: revokeImmediately ? null : eb.ref('api_key_last_used_at'),
              ...(req.body?.name ? { api_key_name: req.body.name.trim() } : {}),
              api_key_hint: apiKeyHint(apiKey),
              api_key_created_at: now,
              api_key_last_used_at: null,
              api_key_version: eb('api_key_version', '+', 1),
              revision: eb('revision', '+', 1),
              updated_at: now,
            }))
            .where('id', '=', sellerId)
            .returningAll()
            .executeTakeFirstOrThrow();
          // Every SellerAuth cache (and the gateway's forwarding keys) drops this seller's entries on this event.
          await publishSellerUpdated(trx, row, now);
          return row;
        });
        res.json({
          apiKey,
          apiKeyVersion: updated.api_key_version,
          previousKeyExpiresAt: revokeImmediately ? null : previousExpiresAt.toISOString(),
          account: toAccount(updated),
        });
      },
    }),

    defineRoute({
      method: 'patch',
      path: '/api/v1/account/api-key',
      summary: 'Name the current secret key (say where it is used); the key itself does not change',
      auth,
      body: ApiKeyRename,
      responses: { '200': Account },
      handler: async (req, res) => {
        const row = await ctx.db
          .updateTable('sellers')
          .set({ api_key_name: req.body.name.trim(), updated_at: config.now() })
          .where('id', '=', currentSeller(req).id)
          .returningAll()
          .executeTakeFirstOrThrow();
        res.json(toAccount(row));
      },
    }),

    defineRoute({
      method: 'post',
      path: '/api/v1/account/publishable-key/rotate',
      summary:
        'Replace the publishable key (pk_…; wallet session only); pages using the old one must be updated',
      auth,
      body: EmptyBody,
      bodyOptional: true,
      responses: { '200': PublishableKeyRotated },
      handler: async (req, res) => {
        requireWalletSession(req, 'rotating the publishable key');
        const now = config.now();
        const publishableKey = newPublishableKey(config.production);
        const sellerId = currentSeller(req).id;
        await ctx.inTransaction(async (trx) => {
          const row = await trx
            .updateTable('sellers')
            .set((eb) => ({
              publishable_key: publishableKey,
              revision: eb('revision', '+', 1),
              updated_at: now,
            }))
            .where('id', '=', sellerId)
            .returningAll()
            .executeTakeFirstOrThrow();
          // checkout's projection (and every SellerAuth cache) follows this event.
          await publishSellerUpdated(trx, row, now);
        });
        res.json({ publishableKey });
      },
    }),

    defineRoute({
      method: 'post',
      path: '/api/v1/account/webhook-secret/rotate',
      summary: 'Replace the webhook signing secret (shown once; wallet session only)',
      auth,
      body: EmptyBody,
      bodyOptional: true,
      responses: { '200': WebhookSecretRotated },
      handler: async (req, res) => {
        requireWalletSession(req, 'rotating the webhook secret');
        const now = config.now();
        const secret = newWebhookSecret();
        const sellerId = currentSeller(req).id;
        const updated = await ctx.inTransaction(async (trx) => {
          const row = await trx
            .updateTable('sellers')
            .set((eb) => ({
              webhook_secret_encrypted: rc.secrets.seal(secret),
              webhook_secret_version: eb('webhook_secret_version', '+', 1),
              revision: eb('revision', '+', 1),
              updated_at: now,
            }))
            .where('id', '=', sellerId)
            .returningAll()
            .executeTakeFirstOrThrow();
          await publishSellerUpdated(trx, row, now);
          return row;
        });
        res.json({ webhookSecret: secret, webhookSecretVersion: updated.webhook_secret_version });
      },
    }),
  ];
}
