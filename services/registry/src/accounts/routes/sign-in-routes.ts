import { type AnyRoute, badRequest, defineRoute } from '@paygate/http';
import type { Request, Response } from 'express';
import { sql, type Transaction } from 'kysely';
import { SiweMessage } from 'siwe';
import { currentSeller, sellerRouteAuth } from '../../auth/authenticate';
import { issueSessionToken } from '../../auth/sessions';
import type { RegistryContext } from '../../context';
import type { RegistryDatabase } from '../../db';
import { refusal } from '../../errors';
import { RegistryReason } from '../../reasons';
import { NoBody } from '../../shared/schema';
import {
  apiKeyHint,
  hashApiKey,
  newApiKey,
  newId,
  newPublishableKey,
  sealedForwardingKey,
  signerOf,
} from '../../shared/secrets';
import { consumeNonce, issueNonce } from '../nonces';
import { changeCredentials, publishSellerUpdated, type SellerRow, toAccount } from '../repository';
import { NonceResponse, SignOutResponse, VerifyRequest, VerifyResponse } from '../schemas';

const siweRefused = (code: RegistryReason, message: string) =>
  refusal(401, code, message, 'must be a fresh sign-in message for this domain', 'message');

function parseSiwe(text: string): SiweMessage {
  try {
    return new SiweMessage(text);
  } catch {
    const rule = 'must be an EIP-4361 (Sign-In with Ethereum) message';
    throw badRequest('message', rule, 'message is not an EIP-4361 sign-in message');
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

/** The sign-in message, checked: this domain, origin and chain, signed by its address, unexpired (401 says why). */
async function checkSignInMessage(
  rc: RegistryContext,
  body: { message: string; signature: string },
  now: Date,
): Promise<SiweMessage> {
  const { config } = rc;
  const message = parseSiwe(body.message);
  if (message.domain !== rc.siweDomain) {
    throw siweRefused(
      RegistryReason.SiweDomainMismatch,
      `sign-in message is for ${message.domain}, expected ${rc.siweDomain}`,
    );
  }
  // The URI and chain are part of what the wallet agreed to: a message made for another site (same host
  // name, other scheme or port) or another chain is not a sign-in here.
  if (!sameOrigin(message.uri, config.publicBaseUrl)) {
    throw siweRefused(
      RegistryReason.SiweUriMismatch,
      `sign-in message is for URI ${message.uri}, expected ${config.publicBaseUrl}`,
    );
  }
  if (message.chainId !== config.chainId) {
    throw siweRefused(
      RegistryReason.SiweChainMismatch,
      `sign-in message is for chain ${message.chainId}, expected ${config.chainId}`,
    );
  }
  if (signerOf(message.prepareMessage(), body.signature) !== message.address) {
    const message = 'signature does not match the address of the message';
    const rule = 'must be the signature of the message by its address';
    throw refusal(401, RegistryReason.SiweInvalidSignature, message, rule, 'signature');
  }
  const verdict = await message.verify(
    { signature: body.signature, domain: rc.siweDomain, time: now.toISOString() },
    { suppressExceptions: true },
  );
  if (!verdict.success) {
    const reason = String(verdict.error?.type ?? 'refused');
    throw siweRefused(
      reason.startsWith('Expired') ? RegistryReason.SiweExpired : RegistryReason.SiweRefused,
      `sign-in refused: ${reason}`,
    );
  }
  if (message.issuedAt && new Date(message.issuedAt).getTime() > now.getTime() + 5 * 60_000) {
    throw siweRefused(RegistryReason.SiweRefused, 'sign-in message is issued in the future');
  }
  return message;
}

/** The account of a wallet: addresses compare without their checksum case. */
function byWallet(trx: Transaction<RegistryDatabase>, address: string) {
  return trx
    .selectFrom('sellers')
    .selectAll()
    .where(sql<string>`lower(wallet_address)`, '=', address.toLowerCase());
}

/** Uses the nonce up and finds the wallet's account, or creates it (then with its API key, shown once). */
async function signInOrSignUp(
  rc: RegistryContext,
  trx: Transaction<RegistryDatabase>,
  message: SiweMessage,
  http: { req: Request; res: Response },
  now: Date,
): Promise<{ seller: SellerRow; apiKey: string | undefined }> {
  const { config } = rc;
  if (!(await consumeNonce(trx, message.nonce, now)))
    throw siweRefused(
      RegistryReason.SiweNonceInvalid,
      'nonce is unknown, expired or already used; ask for a new one',
    );
  const existing = await byWallet(trx, message.address).executeTakeFirst();
  if (existing) return { seller: existing, apiKey: undefined };
  await rc.signInLimits.countNewAccount(http.req, http.res);

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
      created_at: now,
      updated_at: now,
    })
    .onConflict((oc) => oc.doNothing())
    .returningAll()
    .executeTakeFirst();
  if (!inserted) {
    // A concurrent first login of the same wallet created the account; this login just signs in.
    const winner = await byWallet(trx, message.address).executeTakeFirstOrThrow();
    return { seller: winner, apiKey: undefined };
  }
  await publishSellerUpdated(trx, inserted, now);
  return { seller: inserted, apiKey };
}

/** Sign-in with Ethereum (nonce, verify) and sign-out. */
export function signInRoutes(rc: RegistryContext): AnyRoute[] {
  return [nonceRoute(rc), verifyRoute(rc), signOutRoute(rc)];
}

function nonceRoute(rc: RegistryContext): AnyRoute {
  return defineRoute({
    method: 'post',
    path: '/api/v1/auth/siwe/nonce',
    summary: 'Get a single-use SIWE nonce (valid 5 minutes)',
    ...NoBody,
    responses: { '201': NonceResponse },
    handler: async (_req, res) => {
      const { nonce, expiresAt } = await issueNonce(rc.ctx.db, rc.config.now(), rc.config.siweNonceTtlMs);
      res.status(201).json({
        nonce,
        expiresAt: expiresAt.toISOString(),
        domain: rc.siweDomain,
        uri: rc.config.publicBaseUrl,
        chainId: rc.config.chainId,
      });
    },
  });
}

function verifyRoute(rc: RegistryContext): AnyRoute {
  return defineRoute({
    method: 'post',
    path: '/api/v1/auth/siwe/verify',
    summary: 'Sign in with Ethereum; the first login creates the account and returns the API key once (201)',
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
      const now = rc.config.now();
      const message = await checkSignInMessage(rc, req.body, now);
      const result = await rc.ctx.inTransaction((trx) => signInOrSignUp(rc, trx, message, { req, res }, now));

      const { sessionSecret, sessionTtlMs } = rc.config;
      const session = await issueSessionToken(result.seller.id, sessionSecret, now, sessionTtlMs);
      res.status(result.apiKey ? 201 : 200).json({
        sessionToken: session.token,
        expiresAt: session.expiresAt.toISOString(),
        seller: toAccount(result.seller),
        ...(result.apiKey ? { apiKey: result.apiKey } : {}),
        publishableKey: result.seller.publishable_key,
      });
    },
  });
}

function signOutRoute(rc: RegistryContext): AnyRoute {
  return defineRoute({
    method: 'post',
    path: '/api/v1/auth/sign-out',
    summary:
      'Sign out: every dashboard session of this seller issued until now stops working (on every device)',
    description:
      'With a session token or the sk_ key. Later requests with an earlier session token are 401 invalid_session, here and at every other Paygate service (they follow seller.updated). The API keys are not affected.',
    auth: sellerRouteAuth(rc),
    ...NoBody,
    responses: { '200': SignOutResponse },
    handler: async (req, res) => {
      const now = rc.config.now();
      const sellerId = currentSeller(req).id;
      // Every SellerAuth cache drops the seller's resolved sessions on this event.
      await changeCredentials(rc.ctx, sellerId, now, () => ({ sessions_revoked_at: now }));
      res.json({ signedOut: true, sessionsRevokedAt: now.toISOString() });
    },
  });
}
