import { randomBytes } from 'node:crypto';
import { type AnyRoute, defineRoute, HttpError } from '@paygate/http';
import { parseUsdc } from '@paygate/money';
import { verifyMessage } from 'ethers';
import { sql } from 'kysely';
import { SiweMessage } from 'siwe';
import { currentSeller, sellerRouteAuth } from '../auth/authenticate';
import { issueSessionToken } from '../auth/sessions';
import type { RegistryContext } from '../context';
import { EmptyBody } from '../shared/schema';
import {
  hashApiKey,
  newApiKey,
  newId,
  newPublishableKey,
  newWebhookSecret,
  sealedForwardingKey,
} from '../shared/secrets';
import { checkSellerUrl } from '../shared/urls';
import { publishSellerUpdated, toAccount } from './repository';
import {
  Account,
  AccountPatch,
  AccountPatchResponse,
  ApiKeyRotated,
  NonceResponse,
  PublishableKeyRotated,
  SignOutResponse,
  VerifyRequest,
  VerifyResponse,
  WebhookSecretRotated,
} from './schemas';

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
      summary: 'Change payout address, webhook URL, settlement frequency or minimum settlement',
      auth,
      body: AccountPatch,
      responses: { '200': AccountPatchResponse },
      handler: async (req, res) => {
        const body = req.body;
        const now = config.now();
        // Settlements are USDC transfers to this address: the zero address would burn the seller's money
        // (or revert every payout), so it is never a payout address.
        if (body.payoutAddress !== undefined && /^0x0{40}$/i.test(body.payoutAddress)) {
          throw new HttpError(400, 'invalid_request', 'payoutAddress must not be the zero address', {
            field: 'payoutAddress',
            rule: 'must not be the zero address',
          });
        }
        if (
          body.payoutAddress !== undefined &&
          config.escrowAddress !== null &&
          body.payoutAddress.toLowerCase() === config.escrowAddress
        ) {
          throw new HttpError(400, 'invalid_request', "payoutAddress must not be Paygate's escrow address", {
            field: 'payoutAddress',
            rule: "must not be Paygate's escrow address",
          });
        }
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
              ...(body.payoutAddress !== undefined ? { payout_address: body.payoutAddress } : {}),
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
      path: '/api/v1/account/api-key/rotate',
      summary: 'Replace the API key; the old one stops working at once',
      auth,
      body: EmptyBody,
      bodyOptional: true,
      responses: { '200': ApiKeyRotated },
      handler: async (req, res) => {
        const now = config.now();
        const apiKey = newApiKey(config.production);
        const sellerId = currentSeller(req).id;
        const updated = await ctx.inTransaction(async (trx) => {
          const row = await trx
            .updateTable('sellers')
            .set((eb) => ({
              api_key_hash: hashApiKey(apiKey),
              forwarding_key_encrypted: sealedForwardingKey(rc.secrets, apiKey),
              api_key_version: eb('api_key_version', '+', 1),
              revision: eb('revision', '+', 1),
              updated_at: now,
            }))
            .where('id', '=', sellerId)
            .returningAll()
            .executeTakeFirstOrThrow();
          // Every SellerAuth cache drops this seller's entries on this event.
          await publishSellerUpdated(trx, row, now);
          return row;
        });
        res.json({ apiKey, apiKeyVersion: updated.api_key_version });
      },
    }),

    defineRoute({
      method: 'post',
      path: '/api/v1/account/publishable-key/rotate',
      summary: 'Replace the publishable key (pk_…); pages using the old one must be updated',
      auth,
      body: EmptyBody,
      bodyOptional: true,
      responses: { '200': PublishableKeyRotated },
      handler: async (req, res) => {
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
      summary: 'Replace the webhook signing secret (shown once)',
      auth,
      body: EmptyBody,
      bodyOptional: true,
      responses: { '200': WebhookSecretRotated },
      handler: async (req, res) => {
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
