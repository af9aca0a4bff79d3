/**
 * Sign-in's rate limits per client address: SIWE nonces (one insert each) and new
 * accounts are bounded; over the limit a 429 with Retry-After and the shared error body, and nothing is stored.
 *
 *   npx jest --ci services/registry/test/rate-limits.test.ts
 */
import { openSchema, siweMessageText } from '@paygate/testing';
import { Wallet } from 'ethers';
import { sql } from 'kysely';
import type { RegistryDatabase } from '../src/db';
import { api, type Harness, startHarness } from './helpers';

const NONCES_PER_MINUTE = 5;
const ACCOUNTS_PER_HOUR = 2;
const PAYOUT_CHALLENGES_PER_MINUTE = 3;

let h: Harness;

beforeAll(async () => {
  h = await startHarness('regrate', {
    SIWE_NONCES_PER_MINUTE: String(NONCES_PER_MINUTE),
    ACCOUNTS_PER_HOUR: String(ACCOUNTS_PER_HOUR),
    PAYOUT_CHALLENGES_PER_MINUTE: String(PAYOUT_CHALLENGES_PER_MINUTE),
  });
});
afterAll(async () => {
  await h?.stop();
});

/** Moves the clock just past the start of the next hour: a fresh window for every limit. */
function nextHour() {
  const nowMs = h.clock.nowMs();
  h.clock.advance(3_600_000 - (nowMs % 3_600_000) + 500);
}

async function signIn(wallet: Wallet) {
  const nonce = await api(h.url, 'POST', '/api/v1/auth/siwe/nonce');
  expect(nonce.status).toBe(201);
  const message = siweMessageText({
    domain: nonce.body.domain,
    address: wallet.address,
    uri: nonce.body.uri,
    nonce: nonce.body.nonce,
    issuedAt: h.clock.now(),
  });
  return api(h.url, 'POST', '/api/v1/auth/siwe/verify', {
    body: { message, signature: await wallet.signMessage(message) },
  });
}

describe('registry: sign-in rate limits per client address', () => {
  it(`hands out at most ${NONCES_PER_MINUTE} SIWE nonces a minute per client, storing none over it`, async () => {
    nextHour();
    const db = openSchema<RegistryDatabase>(h.env.schemaFor('registry'));
    try {
      const stored = async () =>
        Number((await sql<{ n: number }>`select count(*)::int n from siwe_nonces`.execute(db)).rows[0]!.n);
      const before = await stored();
      for (let i = 0; i < NONCES_PER_MINUTE; i++)
        expect((await api(h.url, 'POST', '/api/v1/auth/siwe/nonce')).status).toBe(201);
      const over = await api(h.url, 'POST', '/api/v1/auth/siwe/nonce');
      expect(over.status).toBe(429);
      const retryAfter = Number(over.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(60);
      expect(over.body.error).toMatchObject({
        code: 'rate_limited',
        limit: NONCES_PER_MINUTE,
        retryAfterSeconds: retryAfter,
        message: expect.stringContaining(
          `at most ${NONCES_PER_MINUTE} SIWE nonces per minute per client address`,
        ),
        requestId: expect.any(String),
      });
      expect(await stored()).toBe(before + NONCES_PER_MINUTE);
    } finally {
      await db.destroy();
    }
  });

  it('counts an IPv6 client by its /64: rotating addresses within it does not get more nonces', async () => {
    nextHour();
    // Through a trusted proxy (loopback, the default), as the edge forwards it.
    const from = (address: string) =>
      api(h.url, 'POST', '/api/v1/auth/siwe/nonce', { headers: { 'x-forwarded-for': address } });
    for (let i = 0; i < NONCES_PER_MINUTE; i++)
      expect((await from(`2001:db8:7:7::${i + 1}`)).status).toBe(201);
    const rotated = await from('2001:db8:7:7:ffff:ffff:ffff:ffff');
    expect(rotated.status).toBe(429);
    expect(rotated.body.error.code).toBe('rate_limited');
    // Another /64 is another client.
    expect((await from('2001:db8:7:8::1')).status).toBe(201);
  });

  it(`creates at most ${ACCOUNTS_PER_HOUR} accounts an hour per client; existing accounts still sign in`, async () => {
    nextHour();
    const first = new Wallet(Wallet.createRandom().privateKey);
    expect((await signIn(first)).status).toBe(201);
    expect((await signIn(new Wallet(Wallet.createRandom().privateKey))).status).toBe(201);
    const refused = new Wallet(Wallet.createRandom().privateKey);
    const over = await signIn(refused);
    expect(over.status).toBe(429);
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(60);
    expect(over.body.error).toMatchObject({
      code: 'rate_limited',
      limit: ACCOUNTS_PER_HOUR,
      message: expect.stringContaining(
        `at most ${ACCOUNTS_PER_HOUR} new accounts per hour per client address`,
      ),
    });
    const db = openSchema<RegistryDatabase>(h.env.schemaFor('registry'));
    try {
      const row = await db
        .selectFrom('sellers')
        .select('id')
        .where(sql<string>`lower(wallet_address)`, '=', refused.address.toLowerCase())
        .executeTakeFirst();
      expect(row).toBeUndefined();
    } finally {
      await db.destroy();
    }
    // Signing in to an account that exists creates nothing: not counted, not refused.
    expect((await signIn(first)).status).toBe(200);
    // The next hour the refused wallet gets its account.
    nextHour();
    expect((await signIn(refused)).status).toBe(201);
  });

  it(`issues at most ${PAYOUT_CHALLENGES_PER_MINUTE} payout-address challenges a minute per client, storing none over it`, async () => {
    nextHour();
    const signedIn = await signIn(new Wallet(Wallet.createRandom().privateKey));
    expect(signedIn.status).toBe(201);
    const token = signedIn.body.sessionToken as string;
    const db = openSchema<RegistryDatabase>(h.env.schemaFor('registry'));
    try {
      const stored = async () =>
        Number((await sql<{ n: number }>`select count(*)::int n from siwe_nonces`.execute(db)).rows[0]!.n);
      const before = await stored();
      const ask = () =>
        api(h.url, 'POST', '/api/v1/account/payout-address/challenge', {
          token,
          body: { payoutAddress: Wallet.createRandom().address },
        });
      for (let i = 0; i < PAYOUT_CHALLENGES_PER_MINUTE; i++) expect((await ask()).status).toBe(201);
      const over = await ask();
      expect(over.status).toBe(429);
      expect(Number(over.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(over.body.error).toMatchObject({
        code: 'rate_limited',
        limit: PAYOUT_CHALLENGES_PER_MINUTE,
        message: expect.stringContaining('payout-address challenges per minute per client address'),
      });
      expect(await stored()).toBe(before + PAYOUT_CHALLENGES_PER_MINUTE);
      // The next minute the client may ask again.
      h.clock.advance(60_000);
      expect((await ask()).status).toBe(201);
    } finally {
      await db.destroy();
    }
  });
});
