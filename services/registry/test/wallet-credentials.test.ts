/**
 * What only the account wallet may do: an sk_ API key alone cannot change the payout address or the webhook URL
 * nor rotate keys; a session token alone cannot move payouts (a fresh wallet signature over the new address
 * can); a payout change is announced and takes effect after PAYOUT_ADDRESS_DELAY; a rotated-out key keeps
 * working for KEY_ROTATION_OVERLAP unless revoked at once. Real Postgres and NATS; the clock is moved, not waited.
 *
 *   npx jest services/registry/test/wallet-credentials
 */
import { forwardingKeyFromApiKey } from '@paygate/agent-client';
import { requestRpc } from '@paygate/bus';
import type { EventEnvelope } from '@paygate/contracts';
import { EventRecorder, openSchema, signUpSeller, siweMessageText, waitFor } from '@paygate/testing';
import { Wallet } from 'ethers';
import type { RegistryDatabase } from '../src/db';
import { api, type Harness, startHarness } from './helpers';

const HOUR = 60 * 60 * 1000;
let h: Harness;

beforeAll(async () => {
  h = await startHarness('regwallet', {
    PAYOUT_ADDRESS_DELAY_MS: String(HOUR),
    KEY_ROTATION_OVERLAP_MS: String(2 * HOUR),
    ACCOUNT_CHANGES_INTERVAL_MS: '100',
  });
});
afterAll(async () => {
  await h?.stop();
});

async function challenge(token: string, payoutAddress: string) {
  const issued = await api(h.url, 'POST', '/api/v1/account/payout-address/challenge', {
    token,
    body: { payoutAddress },
  });
  expect(issued.status).toBe(201);
  return issued.body as { message: string; chainId: number; expiresAt: string; delaySeconds: number };
}

/**
 * The seller.updated of one seller with these fields, once the recorder has heard it: the recorder hears every
 * seller's, and moving the clock makes other tests' pending changes fall due too.
 */
function sellerUpdatedOf(
  updates: EventRecorder,
  sellerId: string,
  fields: Record<string, unknown> = {},
): Promise<EventEnvelope> {
  return updates.waitForEvent(
    (data) => data.sellerId === sellerId && Object.entries(fields).every(([k, v]) => data[k] === v),
    { description: `seller.updated of ${sellerId} with ${JSON.stringify(fields)}` },
  );
}

describe('the sk_ API key alone', () => {
  it('cannot change the payout address or webhook URL nor rotate keys: 403 naming the credential needed', async () => {
    const seller = await signUpSeller(h.url, Wallet.createRandom());
    const attacker = Wallet.createRandom().address;
    const payout = await api(h.url, 'PATCH', '/api/v1/account', {
      token: seller.apiKey,
      body: { payoutAddress: attacker },
    });
    expect(payout.status).toBe(403);
    expect(payout.body.error).toMatchObject({ code: 'wallet_signature_required', field: 'payoutAddress' });
    expect(payout.body.error.message).toMatch(/signature by the account wallet/);

    const webhook = await api(h.url, 'PATCH', '/api/v1/account', {
      token: seller.apiKey,
      body: { webhookUrl: 'http://127.0.0.1:9/steal' },
    });
    expect(webhook.status).toBe(403);
    expect(webhook.body.error).toMatchObject({ code: 'wallet_session_required', field: 'Authorization' });
    expect(webhook.body.error.message).toMatch(/Sign-In with Ethereum session/);

    for (const what of ['api-key', 'webhook-secret', 'publishable-key']) {
      const rotated = await api(h.url, 'POST', `/api/v1/account/${what}/rotate`, { token: seller.apiKey });
      expect({ what, status: rotated.status, code: rotated.body.error.code }).toEqual({
        what,
        status: 403,
        code: 'wallet_session_required',
      });
    }
    // Nothing changed: the key still works and the payout address is the wallet's.
    const account = await api(h.url, 'GET', '/api/v1/account', { token: seller.apiKey });
    expect(account.body).toMatchObject({
      payoutAddress: seller.walletAddress,
      webhookUrl: null,
      apiKeyVersion: 1,
    });
    // The key still does what a server needs: settings that move no money, skills.
    const settings = await api(h.url, 'PATCH', '/api/v1/account', {
      token: seller.apiKey,
      body: { settlementFrequency: 'WEEKLY' },
    });
    expect(settings.status).toBe(200);
    // The wallet's session sets the webhook URL.
    const bySession = await api(h.url, 'PATCH', '/api/v1/account', {
      token: seller.sessionToken,
      body: { webhookUrl: 'http://127.0.0.1:9/hooks' },
    });
    expect(bySession.status).toBe(200);
  });
});

describe('payout address', () => {
  it('a stolen session token cannot redirect payouts: only a fresh, unused signature by the account wallet over the new address', async () => {
    const wallet = Wallet.createRandom();
    const seller = await signUpSeller(h.url, wallet);
    const thief = Wallet.createRandom();
    const viaPatch = await api(h.url, 'PATCH', '/api/v1/account', {
      token: seller.sessionToken,
      body: { payoutAddress: thief.address },
    });
    expect(viaPatch.status).toBe(403);
    expect(viaPatch.body.error.code).toBe('wallet_signature_required');

    // The thief asks for a challenge with the stolen session but cannot sign it with the account's wallet.
    const issued = await challenge(seller.sessionToken, thief.address);
    expect(issued.message).toContain(`Account: ${seller.sellerId}`);
    expect(issued.message).toContain(`New payout address: ${thief.address}`);
    expect(issued.message).toContain(`Chain ID: ${issued.chainId}`);
    const forged = await api(h.url, 'POST', '/api/v1/account/payout-address', {
      token: seller.sessionToken,
      body: { message: issued.message, signature: await thief.signMessage(issued.message) },
    });
    expect(forged.status).toBe(401);
    expect(forged.body.error).toMatchObject({ code: 'wallet_signature_invalid', field: 'signature' });

    // A signature the owner made for one address does not carry over to another.
    const own = await challenge(seller.apiKey, Wallet.createRandom().address);
    const ownSignature = await wallet.signMessage(own.message);
    const swapped = own.message.replace(
      /New payout address: 0x[0-9a-fA-F]{40}/,
      `New payout address: ${thief.address}`,
    );
    const tampered = await api(h.url, 'POST', '/api/v1/account/payout-address', {
      token: seller.sessionToken,
      body: { message: swapped, signature: ownSignature },
    });
    expect(tampered.status).toBe(401);
    expect(tampered.body.error.code).toBe('wallet_signature_invalid');

    // Another account's signed message is refused here.
    const other = await signUpSeller(h.url, thief);
    const othersChallenge = await challenge(other.apiKey, thief.address);
    const elsewhere = await api(h.url, 'POST', '/api/v1/account/payout-address', {
      token: seller.sessionToken,
      body: { message: othersChallenge.message, signature: await thief.signMessage(othersChallenge.message) },
    });
    expect(elsewhere.status).toBe(401);
    expect(elsewhere.body.error.code).toBe('payout_change_wrong_account');

    // The owner's signature is accepted once; a replay of it is refused.
    const accepted = await api(h.url, 'POST', '/api/v1/account/payout-address', {
      token: seller.apiKey,
      body: { message: own.message, signature: ownSignature },
    });
    expect(accepted.status).toBe(200);
    const replay = await api(h.url, 'POST', '/api/v1/account/payout-address', {
      token: seller.apiKey,
      body: { message: own.message, signature: ownSignature },
    });
    expect(replay.status).toBe(401);
    expect(replay.body.error.code).toBe('payout_change_nonce_invalid');

    // An expired challenge is refused.
    const late = await challenge(seller.apiKey, Wallet.createRandom().address);
    const lateSignature = await wallet.signMessage(late.message);
    h.clock.advance(11 * 60_000);
    try {
      const expired = await api(h.url, 'POST', '/api/v1/account/payout-address', {
        token: seller.apiKey,
        body: { message: late.message, signature: lateSignature },
      });
      expect(expired.status).toBe(401);
      expect(expired.body.error.code).toBe('payout_change_expired');
    } finally {
      h.clock.advance(-11 * 60_000);
    }
  });

  it('is announced at once and paid to only after PAYOUT_ADDRESS_DELAY: until then settlement still sees the old address', async () => {
    const wallet = Wallet.createRandom();
    const seller = await signUpSeller(h.url, wallet);
    const bus = await h.env.bus();
    const announced = new EventRecorder(bus, 'seller.payout_address_change_requested');
    const updates = new EventRecorder(bus, 'seller.updated');
    const next = Wallet.createRandom().address;
    const issued = await challenge(seller.sessionToken, next);
    expect(issued.delaySeconds).toBe(3600);
    const changed = await api(h.url, 'POST', '/api/v1/account/payout-address', {
      token: seller.sessionToken,
      body: { message: issued.message, signature: await wallet.signMessage(issued.message) },
    });
    expect(changed.status).toBe(200);
    expect(changed.body.account.payoutAddress).toBe(wallet.address);
    expect(changed.body.account.pendingPayoutAddress).toEqual({
      address: next,
      effectiveAt: changed.body.effectiveAt,
    });
    const effectiveAt = Date.parse(changed.body.effectiveAt);
    expect(effectiveAt - Date.now()).toBeGreaterThan(HOUR - 60_000);

    const announcement = await announced.waitForEvent((data) => data.sellerId === seller.sellerId);
    expect(announcement.data).toEqual({
      sellerId: seller.sellerId,
      walletAddress: wallet.address,
      currentPayoutAddress: wallet.address,
      newPayoutAddress: next,
      requestedAt: expect.any(String),
      effectiveAt: changed.body.effectiveAt,
    });
    announced.stop();

    // The identity the other services resolve (and seller.updated) still carries the current address.
    const resolve = () =>
      requestRpc(bus, 'registry.resolve_api_key', { apiKey: seller.apiKey }, { timeoutMs: 10_000 });
    expect(await resolve()).toMatchObject({ ok: true, seller: { payoutAddress: wallet.address } });
    h.clock.advance(HOUR - 5 * 60_000);
    try {
      // Several passes of the worker later, still the old address.
      await new Promise((r) => setTimeout(r, 400));
      expect((await api(h.url, 'GET', '/api/v1/account', { token: seller.apiKey })).body.payoutAddress).toBe(
        wallet.address,
      );
      h.clock.advance(5 * 60_000 + 1000);
      const applied = await waitFor(async () => {
        const account = await api(h.url, 'GET', '/api/v1/account', { token: seller.apiKey });
        return account.body.payoutAddress === next && account.body;
      });
      expect(applied.pendingPayoutAddress).toBeNull();
      expect(await resolve()).toMatchObject({ ok: true, seller: { payoutAddress: next } });
      // This seller's seller.updated (the recorder hears every seller's, and other tests' changes fall due too).
      await sellerUpdatedOf(updates, seller.sellerId, { payoutAddress: next });
    } finally {
      h.clock.advance(-(HOUR + 1000));
      updates.stop();
    }
  });

  it('the wallet session cancels a pending change; the API key cannot', async () => {
    const wallet = Wallet.createRandom();
    const seller = await signUpSeller(h.url, wallet);
    const issued = await challenge(seller.apiKey, Wallet.createRandom().address);
    await api(h.url, 'POST', '/api/v1/account/payout-address', {
      token: seller.apiKey,
      body: { message: issued.message, signature: await wallet.signMessage(issued.message) },
    });
    const byKey = await api(h.url, 'POST', '/api/v1/account/payout-address/cancel', { token: seller.apiKey });
    expect(byKey.status).toBe(403);
    const cancelled = await api(h.url, 'POST', '/api/v1/account/payout-address/cancel', {
      token: seller.sessionToken,
    });
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({ payoutAddress: wallet.address, pendingPayoutAddress: null });
  });
});

describe('API key rotation', () => {
  it('keeps the old key (and its forwarding key) valid for KEY_ROTATION_OVERLAP, then drops it and tells the caches', async () => {
    const seller = await signUpSeller(h.url, Wallet.createRandom());
    const bus = await h.env.bus();
    const rotated = await api(h.url, 'POST', '/api/v1/account/api-key/rotate', {
      token: seller.sessionToken,
    });
    expect(rotated.status).toBe(200);
    expect(rotated.body.apiKeyVersion).toBe(2);
    expect(Date.parse(rotated.body.previousKeyExpiresAt) - Date.now()).toBeGreaterThan(2 * HOUR - 60_000);
    for (const key of [seller.apiKey, rotated.body.apiKey])
      expect((await api(h.url, 'GET', '/api/v1/account', { token: key })).status).toBe(200);
    const resolve = (apiKey: string) =>
      requestRpc(bus, 'registry.resolve_api_key', { apiKey }, { timeoutMs: 10_000 });
    expect(await resolve(seller.apiKey)).toMatchObject({ ok: true, seller: { sellerId: seller.sellerId } });
    const forwarding = () =>
      requestRpc(bus, 'registry.forwarding_key', { sellerId: seller.sellerId }, { timeoutMs: 10_000 });
    expect(await forwarding()).toEqual({
      ok: true,
      key: forwardingKeyFromApiKey(rotated.body.apiKey).toString('base64url'),
      apiKeyVersion: 2,
      previousKey: forwardingKeyFromApiKey(seller.apiKey).toString('base64url'),
      previousKeyExpiresAt: rotated.body.previousKeyExpiresAt,
    });

    const updates = new EventRecorder(bus, 'seller.updated');
    h.clock.advance(2 * HOUR + 1000);
    try {
      const old = await api(h.url, 'GET', '/api/v1/account', { token: seller.apiKey });
      expect(old.status).toBe(401);
      expect(old.body.error.code).toBe('unknown_api_key');
      expect(await resolve(seller.apiKey)).toEqual({ ok: false, reason: 'unknown_key' });
      // The worker clears the old key and publishes seller.updated, so every cache of it is dropped.
      await sellerUpdatedOf(updates, seller.sellerId);
      expect(await forwarding()).toEqual({
        ok: true,
        key: forwardingKeyFromApiKey(rotated.body.apiKey).toString('base64url'),
        apiKeyVersion: 2,
      });
      expect((await api(h.url, 'GET', '/api/v1/account', { token: rotated.body.apiKey })).status).toBe(200);
    } finally {
      h.clock.advance(-(2 * HOUR + 1000));
      updates.stop();
    }
  });

  it('describes each key (name, last four characters, made, last used) and keeps the old one for the overlap asked', async () => {
    const seller = await signUpSeller(h.url, Wallet.createRandom());
    const account = async () =>
      (await api(h.url, 'GET', '/api/v1/account', { token: seller.sessionToken })).body;
    const first = await account();
    expect(first.apiKey).toEqual({
      name: 'Secret key',
      hint: seller.apiKey.slice(-4),
      createdAt: expect.any(String),
      lastUsedAt: null,
    });
    expect(first.previousApiKey).toBeNull();
    // A request with the key is its use (the session token is not a key use).
    expect((await api(h.url, 'GET', '/api/v1/account', { token: seller.apiKey })).status).toBe(200);
    const used = await account();
    expect(Date.parse(used.apiKey.lastUsedAt)).toBeGreaterThan(Date.parse(first.apiKey.createdAt) - 1);

    const renamed = await api(h.url, 'PATCH', '/api/v1/account/api-key', {
      token: seller.sessionToken,
      body: { name: '  Production server ' },
    });
    expect(renamed.status).toBe(200);
    expect(renamed.body.apiKey.name).toBe('Production server');
    const blank = await api(h.url, 'PATCH', '/api/v1/account/api-key', {
      token: seller.sessionToken,
      body: { name: '   ' },
    });
    expect(blank.status).toBe(400);
    expect(blank.body.error.field).toBe('name');

    // Rotation with a name for the new key and a 3 h overlap: the old key is listed with its expiry.
    const rotated = await api(h.url, 'POST', '/api/v1/account/api-key/rotate', {
      token: seller.sessionToken,
      body: { name: 'Production server v2', overlapHours: 3 },
    });
    expect(rotated.status).toBe(200);
    const expiresMs = Date.parse(rotated.body.previousKeyExpiresAt) - Date.now();
    expect(expiresMs).toBeGreaterThan(3 * HOUR - 60_000);
    expect(expiresMs).toBeLessThan(3 * HOUR + 60_000);
    expect(rotated.body.account.apiKey).toEqual({
      name: 'Production server v2',
      hint: rotated.body.apiKey.slice(-4),
      createdAt: expect.any(String),
      lastUsedAt: null,
    });
    expect(rotated.body.account.previousApiKey).toEqual({
      name: 'Production server',
      hint: seller.apiKey.slice(-4),
      createdAt: first.apiKey.createdAt,
      lastUsedAt: used.apiKey.lastUsedAt,
      expiresAt: rotated.body.previousKeyExpiresAt,
    });
    const tooLong = await api(h.url, 'POST', '/api/v1/account/api-key/rotate', {
      token: seller.sessionToken,
      body: { overlapHours: 721 },
    });
    expect(tooLong.status).toBe(400);
    expect(tooLong.body.error.field).toBe('overlapHours');

    // After the overlap the old key is gone from the account too.
    h.clock.advance(3 * HOUR + 1000);
    try {
      await waitFor(async () => (await account()).previousApiKey === null, {
        message: 'the old key is still listed after its overlap',
      });
    } finally {
      h.clock.advance(-(3 * HOUR + 1000));
    }
  });

  it('revokeImmediately: true ends the old key at once (a leaked key), and any key still in its overlap', async () => {
    const seller = await signUpSeller(h.url, Wallet.createRandom());
    const second = await api(h.url, 'POST', '/api/v1/account/api-key/rotate', { token: seller.sessionToken });
    expect((await api(h.url, 'GET', '/api/v1/account', { token: seller.apiKey })).status).toBe(200);
    const third = await api(h.url, 'POST', '/api/v1/account/api-key/rotate', {
      token: seller.sessionToken,
      body: { revokeImmediately: true },
    });
    expect(third.status).toBe(200);
    expect(third.body.previousKeyExpiresAt).toBeNull();
    for (const key of [seller.apiKey, second.body.apiKey]) {
      const refused = await api(h.url, 'GET', '/api/v1/account', { token: key });
      expect(refused.status).toBe(401);
    }
    expect((await api(h.url, 'GET', '/api/v1/account', { token: third.body.apiKey })).status).toBe(200);
    const db = openSchema<RegistryDatabase>(h.env.schemaFor('registry'));
    const row = await db
      .selectFrom('sellers')
      .select(['previous_api_key_hash', 'previous_forwarding_key_encrypted'])
      .where('id', '=', seller.sellerId)
      .executeTakeFirstOrThrow();
    await db.destroy();
    expect(row).toEqual({ previous_api_key_hash: null, previous_forwarding_key_encrypted: null });
  });
});

describe('Sign-In with Ethereum', () => {
  it('refuses a message for another URI or another chain', async () => {
    const wallet = Wallet.createRandom();
    const attempt = async (overrides: { uri?: string; chainId?: number }) => {
      const nonce = await api(h.url, 'POST', '/api/v1/auth/siwe/nonce');
      expect(nonce.body.chainId).toBe(31337);
      const message = siweMessageText({
        domain: nonce.body.domain,
        address: wallet.address,
        uri: overrides.uri ?? nonce.body.uri,
        nonce: nonce.body.nonce,
        chainId: overrides.chainId ?? nonce.body.chainId,
      });
      return api(h.url, 'POST', '/api/v1/auth/siwe/verify', {
        body: { message, signature: await wallet.signMessage(message) },
      });
    };
    const otherSite = await attempt({ uri: 'https://evil.example/login' });
    expect(otherSite.status).toBe(401);
    expect(otherSite.body.error.code).toBe('siwe_uri_mismatch');
    const otherPort = await attempt({ uri: 'http://paygate.test:9999' });
    expect(otherPort.body.error.code).toBe('siwe_uri_mismatch');
    const otherChain = await attempt({ chainId: 1 });
    expect(otherChain.status).toBe(401);
    expect(otherChain.body.error.code).toBe('siwe_chain_mismatch');
    expect((await attempt({})).status).toBe(201);
  });
});

describe('PAYOUT_ADDRESS_DELAY_MS=0 (make dev)', () => {
  let now: Harness;
  beforeAll(async () => {
    now = await startHarness('regwallet0', { PAYOUT_ADDRESS_DELAY_MS: '0' });
  });
  afterAll(async () => {
    await now?.stop();
  });

  it('applies a signed payout change at once and publishes seller.updated with it', async () => {
    const wallet = Wallet.createRandom();
    const seller = await signUpSeller(now.url, wallet);
    const updates = new EventRecorder(await now.env.bus(), 'seller.updated');
    const next = Wallet.createRandom().address;
    const issued = await api(now.url, 'POST', '/api/v1/account/payout-address/challenge', {
      token: seller.apiKey,
      body: { payoutAddress: next },
    });
    const changed = await api(now.url, 'POST', '/api/v1/account/payout-address', {
      token: seller.apiKey,
      body: { message: issued.body.message, signature: await wallet.signMessage(issued.body.message) },
    });
    expect(changed.status).toBe(200);
    expect(changed.body.account).toMatchObject({ payoutAddress: next, pendingPayoutAddress: null });
    await sellerUpdatedOf(updates, seller.sellerId, { payoutAddress: next });
    updates.stop();
  });
});
