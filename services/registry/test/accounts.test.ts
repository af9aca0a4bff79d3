import { createHash } from 'node:crypto';
import { forwardingKeyFromApiKey } from '@paygate/agent-client';
import { requestRpc } from '@paygate/bus';
import { EventRecorder, openSchema, signUpSeller, siweMessageText, testWallets } from '@paygate/testing';
import { Wallet } from 'ethers';
import type { RegistryDatabase } from '../src/db';
import { api, type Harness, startHarness } from './helpers';

let h: Harness;
const DOMAIN = 'paygate.test:8080';
const ESCROW = testWallets.escrow.address;

beforeAll(async () => {
  h = await startHarness('regacct', { ESCROW_ADDRESS: ESCROW, PAYOUT_ADDRESS_DELAY_MS: '0' });
});
afterAll(async () => {
  await h?.stop();
});

async function signedMessage(
  wallet: { address: string; signMessage(m: string): Promise<string> },
  overrides: Partial<Parameters<typeof siweMessageText>[0]> = {},
) {
  const nonce = await api(h.url, 'POST', '/api/v1/auth/siwe/nonce');
  expect(nonce.status).toBe(201);
  const message = siweMessageText({
    domain: nonce.body.domain,
    address: wallet.address,
    uri: nonce.body.uri,
    nonce: nonce.body.nonce,
    ...overrides,
  });
  return { message, signature: await wallet.signMessage(message), nonce: nonce.body };
}

describe('Sign-In with Ethereum', () => {
  it('first login creates the account and shows both keys; the API key is stored only as a hash', async () => {
    const wallet = Wallet.createRandom();
    const recorder = new EventRecorder(await h.env.bus(), 'seller.updated');
    const { message, signature, nonce } = await signedMessage(wallet);
    expect(nonce.domain).toBe(DOMAIN);
    const first = await api(h.url, 'POST', '/api/v1/auth/siwe/verify', { body: { message, signature } });
    expect(first.status).toBe(201);
    expect(first.body.apiKey).toMatch(/^sk_test_[A-Za-z0-9_-]{32}$/);
    expect(first.body.publishableKey).toMatch(/^pk_test_/);
    expect(first.body.seller.walletAddress).toBe(wallet.address);
    expect(first.body.seller.payoutAddress).toBe(wallet.address);
    expect(first.body.seller.settlementFrequency).toBe('DAILY');
    // Checkout sessions are told apart by their unique amount unless the seller chooses deposit addresses.
    expect(first.body.seller.checkoutMatching).toBe('amount');
    expect(first.body.seller.minimumSettlement).toBe('10');
    expect(typeof first.body.sessionToken).toBe('string');

    const db = openSchema<RegistryDatabase>(h.env.schemaFor('registry'));
    const rows = await db
      .selectFrom('sellers')
      .selectAll()
      .where('id', '=', first.body.seller.sellerId)
      .execute();
    await db.destroy();
    expect(rows).toHaveLength(1);
    expect(rows[0]?.api_key_hash).toBe(createHash('sha256').update(first.body.apiKey).digest('hex'));
    expect(JSON.stringify(rows[0], (_k, v) => (typeof v === 'bigint' ? String(v) : v))).not.toContain(
      first.body.apiKey,
    );

    const events = await recorder.waitForCount(1);
    expect(events[0]!.data).toMatchObject({
      sellerId: first.body.seller.sellerId,
      publishableKey: first.body.publishableKey,
      apiKeyVersion: 1,
    });
    recorder.stop();

    // Second login: same account, no API key shown again.
    const again = await signedMessage(wallet);
    const second = await api(h.url, 'POST', '/api/v1/auth/siwe/verify', {
      body: { message: again.message, signature: again.signature },
    });
    expect(second.status).toBe(200);
    expect(second.body.apiKey).toBeUndefined();
    expect(second.body.seller.sellerId).toBe(first.body.seller.sellerId);
  });

  it('refuses a replayed message (nonces are single-use)', async () => {
    const wallet = Wallet.createRandom();
    const { message, signature } = await signedMessage(wallet);
    expect(
      (await api(h.url, 'POST', '/api/v1/auth/siwe/verify', { body: { message, signature } })).status,
    ).toBe(201);
    const replay = await api(h.url, 'POST', '/api/v1/auth/siwe/verify', { body: { message, signature } });
    expect(replay.status).toBe(401);
    expect(replay.body.error.code).toBe('siwe_nonce_invalid');
  });

  it('refuses a nonce older than five minutes and an expired message', async () => {
    const wallet = Wallet.createRandom();
    const { message, signature } = await signedMessage(wallet);
    h.clock.advance(5 * 60_000 + 1000);
    try {
      const late = await api(h.url, 'POST', '/api/v1/auth/siwe/verify', { body: { message, signature } });
      expect(late.status).toBe(401);
      expect(late.body.error.code).toBe('siwe_nonce_invalid');
    } finally {
      h.clock.advance(-(5 * 60_000 + 1000));
    }
    const expired = await signedMessage(wallet, {
      expirationTime: new Date(Date.now() - 1000),
      issuedAt: new Date(Date.now() - 60_000),
    });
    const refused = await api(h.url, 'POST', '/api/v1/auth/siwe/verify', {
      body: { message: expired.message, signature: expired.signature },
    });
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBe('siwe_expired');
  });

  it('refuses a message for another domain, a forged signature and garbage', async () => {
    const wallet = Wallet.createRandom();
    const wrong = await signedMessage(wallet, { domain: 'evil.example' });
    const refused = await api(h.url, 'POST', '/api/v1/auth/siwe/verify', {
      body: { message: wrong.message, signature: wrong.signature },
    });
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBe('siwe_domain_mismatch');

    const other = Wallet.createRandom();
    const forged = await signedMessage(wallet);
    const badSig = await api(h.url, 'POST', '/api/v1/auth/siwe/verify', {
      body: { message: forged.message, signature: await other.signMessage(forged.message) },
    });
    expect(badSig.status).toBe(401);
    expect(badSig.body.error.field).toBe('signature');

    const garbage = await api(h.url, 'POST', '/api/v1/auth/siwe/verify', {
      body: { message: 'hello', signature: forged.signature },
    });
    expect(garbage.status).toBe(400);
    expect(garbage.body.error.field).toBe('message');
  });
});

describe('account and keys', () => {
  it('a revoking rotation (wallet session) stops the old key at once and shows the new one once; session and key both work', async () => {
    const seller = await signUpSeller(h.url, testWallets.seller.privateKey);
    expect((await api(h.url, 'GET', '/api/v1/account', { token: seller.apiKey })).status).toBe(200);
    const viaSession = await api(h.url, 'GET', '/api/v1/account', { token: seller.sessionToken });
    expect(viaSession.status).toBe(200);
    expect(viaSession.body.apiKeyVersion).toBe(1);

    const rotated = await api(h.url, 'POST', '/api/v1/account/api-key/rotate', {
      token: seller.sessionToken,
      body: { revokeImmediately: true },
    });
    expect(rotated.status).toBe(200);
    expect(rotated.body.apiKeyVersion).toBe(2);
    const old = await api(h.url, 'GET', '/api/v1/account', { token: seller.apiKey });
    expect(old.status).toBe(401);
    expect(old.body.error.code).toBe('unknown_api_key');
    expect((await api(h.url, 'GET', '/api/v1/account', { token: rotated.body.apiKey })).status).toBe(200);
    const account = await api(h.url, 'GET', '/api/v1/account', { token: rotated.body.apiKey });
    expect(JSON.stringify(account.body)).not.toContain('sk_');
  });

  it('sign-out ends every earlier session of the seller, here and at the other services; the API key stays; a new sign-in works', async () => {
    const wallet = Wallet.createRandom();
    const seller = await signUpSeller(h.url, wallet);
    const other = await signedMessage(wallet);
    const secondDevice = await api(h.url, 'POST', '/api/v1/auth/siwe/verify', {
      body: { message: other.message, signature: other.signature },
    });
    const sessions = [seller.sessionToken, secondDevice.body.sessionToken as string];
    for (const token of sessions)
      expect((await api(h.url, 'GET', '/api/v1/account', { token })).status).toBe(200);
    const bus = await h.env.bus();
    const resolve = (apiKey: string) =>
      requestRpc(bus, 'registry.resolve_api_key', { apiKey }, { timeoutMs: 10_000 });
    expect(await resolve(sessions[1]!)).toMatchObject({ ok: true });
    const recorder = new EventRecorder(bus, 'seller.updated');

    const signedOut = await api(h.url, 'POST', '/api/v1/auth/sign-out', { token: sessions[0] });
    expect(signedOut.status).toBe(200);
    expect(signedOut.body).toEqual({ signedOut: true, sessionsRevokedAt: expect.any(String) });

    for (const token of sessions) {
      const refused = await api(h.url, 'GET', '/api/v1/account', { token });
      expect(refused.status).toBe(401);
      expect(refused.body.error).toMatchObject({
        code: 'invalid_session',
        message: 'this session was signed out; sign in again',
      });
    }
    // The other services ask the registry (and drop their cached answer on seller.updated).
    expect(await resolve(sessions[1]!)).toEqual({ ok: false, reason: 'unknown_key' });
    await recorder.waitForEvent((data) => data.sellerId === seller.sellerId);
    recorder.stop();
    expect((await api(h.url, 'GET', '/api/v1/account', { token: seller.apiKey })).status).toBe(200);

    h.clock.advance(1);
    try {
      const again = await signedMessage(wallet);
      const signedIn = await api(h.url, 'POST', '/api/v1/auth/siwe/verify', {
        body: { message: again.message, signature: again.signature },
      });
      expect(signedIn.status).toBe(200);
      const token = signedIn.body.sessionToken as string;
      expect((await api(h.url, 'GET', '/api/v1/account', { token })).status).toBe(200);
      expect(await resolve(token)).toMatchObject({ ok: true });
    } finally {
      h.clock.advance(-1);
    }
  });

  it("answers the gateway's registry.forwarding_key with the key derived from the current API key, sealed at rest", async () => {
    const seller = await signUpSeller(h.url, Wallet.createRandom());
    const bus = await h.env.bus();
    const ask = (sellerId: string) =>
      requestRpc(bus, 'registry.forwarding_key', { sellerId }, { timeoutMs: 10_000 });
    expect(await ask(seller.sellerId)).toEqual({
      ok: true,
      key: forwardingKeyFromApiKey(seller.apiKey).toString('base64url'),
      apiKeyVersion: 1,
    });
    const rotated = await api(h.url, 'POST', '/api/v1/account/api-key/rotate', {
      token: seller.sessionToken,
      body: { revokeImmediately: true },
    });
    expect(await ask(seller.sellerId)).toEqual({
      ok: true,
      key: forwardingKeyFromApiKey(rotated.body.apiKey).toString('base64url'),
      apiKeyVersion: 2,
    });
    const row = await h.registry.ctx.db
      .selectFrom('sellers')
      .select('forwarding_key_encrypted')
      .where('id', '=', seller.sellerId)
      .executeTakeFirstOrThrow();
    expect(row.forwarding_key_encrypted).not.toContain(
      forwardingKeyFromApiKey(rotated.body.apiKey).toString('base64url'),
    );
    // An account whose key predates forwarding keys has none until it rotates its key: the gateway signs ES256.
    await h.registry.ctx.db
      .updateTable('sellers')
      .set({ forwarding_key_encrypted: null })
      .where('id', '=', seller.sellerId)
      .execute();
    expect(await ask(seller.sellerId)).toEqual({ ok: false });
    expect(await ask('sel_nobody')).toEqual({ ok: false });
  });

  it('rotates the publishable key: a new pk_ on the account, the old one gone', async () => {
    const seller = await signUpSeller(h.url, Wallet.createRandom());
    const rotated = await api(h.url, 'POST', '/api/v1/account/publishable-key/rotate', {
      token: seller.sessionToken,
    });
    expect(rotated.status).toBe(200);
    expect(rotated.body.publishableKey).toMatch(/^pk_test_/);
    expect(rotated.body.publishableKey).not.toBe(seller.publishableKey);
    const account = await api(h.url, 'GET', '/api/v1/account', { token: seller.sessionToken });
    expect(account.body.publishableKey).toBe(rotated.body.publishableKey);
    const withBody = await api(h.url, 'POST', '/api/v1/account/publishable-key/rotate', {
      token: seller.sessionToken,
      body: { publishableKey: 'pk_mine' },
    });
    expect(withBody.status).toBe(400);
  });

  it('refuses missing, malformed and expired credentials with 401', async () => {
    expect((await api(h.url, 'GET', '/api/v1/account')).status).toBe(401);
    expect((await api(h.url, 'GET', '/api/v1/account', { token: 'sk_nope' })).status).toBe(401);
    expect((await api(h.url, 'GET', '/api/v1/account', { token: 'not-a-jwt' })).status).toBe(401);
    expect(
      (await api(h.url, 'GET', '/api/v1/account', { headers: { authorization: 'Basic abc' } })).status,
    ).toBe(401);
    const seller = await signUpSeller(h.url, Wallet.createRandom());
    h.clock.advance(13 * 60 * 60_000);
    try {
      const expired = await api(h.url, 'GET', '/api/v1/account', { token: seller.sessionToken });
      expect(expired.status).toBe(401);
      expect(expired.body.error.code).toBe('invalid_session');
    } finally {
      h.clock.advance(-13 * 60 * 60_000);
    }
  });

  it('changes payout address (wallet signature) and settings (wallet session), creates the webhook secret once and rotates it; publishes seller.updated', async () => {
    const wallet = Wallet.createRandom();
    const seller = await signUpSeller(h.url, wallet);
    const bus = await h.env.bus();
    const recorder = new EventRecorder(bus, 'seller.updated');
    await bus.nc.flush(); // the subscription is on the server before the first change
    const payout = Wallet.createRandom().address;
    const challenge = await api(h.url, 'POST', '/api/v1/account/payout-address/challenge', {
      token: seller.apiKey,
      body: { payoutAddress: payout },
    });
    const changed = await api(h.url, 'POST', '/api/v1/account/payout-address', {
      token: seller.apiKey,
      body: { message: challenge.body.message, signature: await wallet.signMessage(challenge.body.message) },
    });
    expect(changed.status).toBe(200);
    const patched = await api(h.url, 'PATCH', '/api/v1/account', {
      token: seller.sessionToken,
      body: {
        webhookUrl: 'http://127.0.0.1:9/hooks',
        settlementFrequency: 'WEEKLY',
        minimumSettlement: 25.5,
        checkoutMatching: 'deposit_address',
      },
    });
    expect(patched.status).toBe(200);
    expect(patched.body.account).toMatchObject({
      payoutAddress: payout,
      webhookUrl: 'http://127.0.0.1:9/hooks',
      settlementFrequency: 'WEEKLY',
      minimumSettlement: '25.5',
      checkoutMatching: 'deposit_address',
      webhookSecretVersion: 1,
    });
    expect(patched.body.webhookSecret).toMatch(/^whsec_/);
    const secret = patched.body.webhookSecret;

    const again = await api(h.url, 'PATCH', '/api/v1/account', {
      token: seller.sessionToken,
      body: { webhookUrl: 'http://127.0.0.1:9/other' },
    });
    expect(again.body.webhookSecret).toBeUndefined();

    const db = openSchema<RegistryDatabase>(h.env.schemaFor('registry'));
    const row = await db
      .selectFrom('sellers')
      .selectAll()
      .where('id', '=', seller.sellerId)
      .executeTakeFirstOrThrow();
    await db.destroy();
    expect(row.webhook_secret_encrypted).not.toContain(secret.slice(6));

    const rotated = await api(h.url, 'POST', '/api/v1/account/webhook-secret/rotate', {
      token: seller.sessionToken,
    });
    expect(rotated.status).toBe(200);
    expect(rotated.body.webhookSecretVersion).toBe(2);
    expect(rotated.body.webhookSecret).not.toBe(secret);

    // One seller.updated per change (payout, two settings patches, the rotation), delivered at least once: wait for
    // the rotation's own rather than for a count (a redelivered event made the fourth arrival an older one). The
    // recorder also hears the sign-up's own event when the outbox relay publishes it late, and other tests' sellers:
    // count only this seller's events that carry the new payout address.
    const rotation = await recorder.waitForEvent(
      (data) => data.sellerId === seller.sellerId && data.webhookSecretVersion === 2,
    );
    const events = recorder.events;
    const changes = events.filter((e) => {
      const data = e.data as { sellerId?: string; payoutAddress?: string };
      return data.sellerId === seller.sellerId && data.payoutAddress === payout;
    });
    expect(new Set(changes.map((e) => e.id)).size).toBe(4);
    const last = rotation.data as Record<string, unknown>;
    expect(last).toMatchObject({
      sellerId: seller.sellerId,
      payoutAddress: payout,
      webhookSecretVersion: 2,
      settlementFrequency: 'WEEKLY',
      minimumSettlement: '25.5',
      checkoutMatching: 'deposit_address',
    });
    expect(JSON.stringify(events)).not.toContain('whsec_');
    recorder.stop();

    // The notifier's RPC gets the current secret (sealed to the requester's one-time key on the wire, opened by requestRpc).
    expect(
      await requestRpc(bus, 'registry.webhook_secret', { sellerId: seller.sellerId }, { timeoutMs: 10_000 }),
    ).toEqual({ ok: true, secret: rotated.body.webhookSecret, version: 2 });
    expect(
      await requestRpc(bus, 'registry.webhook_secret', { sellerId: 'nobody' }, { timeoutMs: 10_000 }),
    ).toEqual({ ok: false });
    // Asked without a reply key, the registry refuses rather than answering in clear.
    const bare = await bus.nc.request(
      bus.rpcSubject('registry.webhook_secret'),
      new TextEncoder().encode(JSON.stringify({ sellerId: seller.sellerId })),
      { timeout: 2000 },
    );
    expect(bare.headers?.get('Nats-Service-Error-Code')).toBe('400');
    expect(new TextDecoder().decode(bare.data)).not.toContain('whsec_');
  });

  it('names the field and rule of a bad setting', async () => {
    const seller = await signUpSeller(h.url, Wallet.createRandom());
    const cases: Array<[unknown, string]> = [
      [{ settlementFrequency: 'HOURLY' }, 'settlementFrequency'],
      [{ checkoutMatching: 'qr_code' }, 'checkoutMatching'],
      [{ minimumSettlement: '1.1234567' }, 'minimumSettlement'],
      [{ minimumSettlement: -5 }, 'minimumSettlement'],
      [{ webhookUrl: 'ftp://x' }, 'webhookUrl'],
      [{ surprise: 1 }, 'surprise'],
      [{}, 'body'],
    ];
    for (const [body, field] of cases) {
      const response = await api(h.url, 'PATCH', '/api/v1/account', { token: seller.sessionToken, body });
      expect({ body, status: response.status, field: response.body.error.field }).toEqual({
        body,
        status: 400,
        field,
      });
      expect(typeof response.body.error.rule).toBe('string');
    }
    // The new payout address follows the same rules, checked when the challenge is asked for.
    const payoutCases: Array<[unknown, string]> = [
      [{ payoutAddress: '0x123' }, 'payoutAddress'],
      [{ payoutAddress: '0x0000000000000000000000000000000000000000' }, 'payoutAddress'],
      // A payout to the escrow wallet never leaves it: the seller would be marked settled and paid nothing.
      [{ payoutAddress: ESCROW.toLowerCase() }, 'payoutAddress'],
      [{}, 'payoutAddress'],
    ];
    for (const [body, field] of payoutCases) {
      const response = await api(h.url, 'POST', '/api/v1/account/payout-address/challenge', {
        token: seller.apiKey,
        body,
      });
      expect({ body, status: response.status, field: response.body.error.field }).toEqual({
        body,
        status: 400,
        field,
      });
    }
  });
});
