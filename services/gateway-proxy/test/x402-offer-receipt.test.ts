import { decodePaymentRequired } from '@paygate/protocol';
import type { RunningSettlement } from '@paygate/settlement';
import { testWallets } from '@paygate/testing';
import {
  decodeSignedOffers,
  extractOffersFromPaymentRequired,
  extractReceiptFromResponse,
  findAcceptsObjectFromSignedOffer,
  type JWSSignedOffer,
  type JWSSignedReceipt,
  verifyOfferSignatureJWS,
  verifyReceiptMatchesOffer,
  verifyReceiptSignatureJWS,
} from '@x402/extensions/offer-receipt';
import { decodePaymentResponseHeader, wrapFetchWithPayment, x402Client } from '@x402/fetch';
import type { JWK } from 'jose';
import { privateKeyToAccount } from 'viem/accounts';
import { loadConfig } from '../src';
import { developmentReceiptKey, ReceiptSigner } from '../src/x402/extensions/offer-receipt';
import { type Harness, skillSnapshot, startHarness, startUpstream } from './harness';
import { startRelayer, x402ClientConfig } from './relayer';

jest.setTimeout(120_000);

/**
 * x402's offer-receipt extension, checked the way a buyer would: an unmodified `@x402/fetch` pays; the 402's
 * offer and the paid answer's receipt verify offline with `@x402/extensions`' own functions and the key Paygate
 * publishes (nothing else asked of Paygate), name the resource, amount, payer, transaction and outcome; a receipt
 * changed by one character, or checked with another key, does not verify.
 */
describe('x402 offer-receipt: offers and receipts signed by Paygate, verifiable offline', () => {
  let h: Harness;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  let settlement: RunningSettlement;
  let publishedKey: JWK & { address: string; kid: string };
  const network = 'eip155:31337';
  const buyer = privateKeyToAccount(testWallets.buyer.privateKey as `0x${string}`);

  beforeAll(async () => {
    h = await startHarness('x402receipt', { RATE_LIMIT_PER_MINUTE: '100000' });
    upstream = await startUpstream();
    settlement = await startRelayer(h);
    await h.publishSkill(skillSnapshot({ name: 'rx', apiBaseUrl: `${upstream.url}/seller` }));
    await h.publishSkill(
      skillSnapshot({ name: 'rxt', mode: 'TICKET', apiBaseUrl: `${upstream.url}/seller` }),
    );
    const keys = await (await fetch(`${h.gateway.url}/.well-known/x402/receipt-keys`)).json();
    publishedKey = keys.keys[0];
  });

  afterAll(async () => {
    await settlement?.stop();
    await upstream?.close();
    await h?.stop();
  });

  const pay = () => wrapFetchWithPayment(fetch, x402Client.fromConfig(x402ClientConfig(h, buyer)));

  it('publishes one ES256K key, as a JWKS with its address, and in the did:web document its kid names', async () => {
    expect(publishedKey).toMatchObject({ kty: 'EC', crv: 'secp256k1', alg: 'ES256K', use: 'sig' });
    expect(publishedKey.kid).toMatch(/^did:web:paygate\.test#receipt-[0-9a-f]{16}$/);
    expect(publishedKey.address).toMatch(/^0x[0-9a-fA-F]{40}$/);
    const did = await (await fetch(`${h.gateway.url}/.well-known/did.json`)).json();
    expect(did.id).toBe('did:web:paygate.test');
    expect(did.verificationMethod[0]).toMatchObject({
      id: publishedKey.kid,
      publicKeyJwk: { kty: 'EC', crv: 'secp256k1', x: publishedKey.x, y: publishedKey.y },
    });
  });

  it("the 402's offer is signed: what is paid, to whom, for which URL, until when", async () => {
    const res = await fetch(`${h.gateway.url}/api/v1/skills/rx/data?city=oslo`);
    expect(res.status).toBe(402);
    const required = decodePaymentRequired(res.headers.get('payment-required')!) as any;
    const offers = extractOffersFromPaymentRequired(required);
    expect(offers).toHaveLength(1);
    const payload = await verifyOfferSignatureJWS(offers[0] as JWSSignedOffer, publishedKey);
    expect(payload).toEqual({
      version: 1,
      resourceUrl: 'http://paygate.test/api/v1/skills/rx/data?city=oslo',
      scheme: 'exact',
      network,
      asset: h.usdcAddress,
      payTo: testWallets.escrow.address,
      amount: '50000',
      validUntil: expect.any(Number),
    });
    const now = Math.floor(Date.now() / 1000);
    expect(payload.validUntil).toBeGreaterThan(now);
    expect(payload.validUntil).toBeLessThanOrEqual(now + 60);
    expect(findAcceptsObjectFromSignedOffer(offers[0]!, required.accepts)).toEqual(required.accepts[0]);
  });

  it('the paid answer carries a signed receipt: resource, amount, payer, transaction and outcome', async () => {
    const first = await fetch(`${h.gateway.url}/api/v1/skills/rx/data?city=oslo`);
    const [offer] = decodeSignedOffers(
      extractOffersFromPaymentRequired(decodePaymentRequired(first.headers.get('payment-required')!) as any),
    );
    const res = await pay()(`${h.gateway.url}/api/v1/skills/rx/data?city=oslo`);
    expect(res.status).toBe(200);
    const settled = decodePaymentResponseHeader(res.headers.get('payment-response')!);
    const receipt = extractReceiptFromResponse(res) as JWSSignedReceipt;
    expect(receipt?.format).toBe('jws');
    const payload = await verifyReceiptSignatureJWS(receipt, publishedKey);
    expect(payload).toEqual({
      version: 1,
      network,
      resourceUrl: 'http://paygate.test/api/v1/skills/rx/data?city=oslo',
      payer: buyer.address,
      transaction: settled.transaction,
      issuedAt: expect.any(Number),
      amount: '50000',
      asset: h.usdcAddress,
      payTo: testWallets.escrow.address,
      outcome: 'served',
      status: 200,
    });
    expect(verifyReceiptMatchesOffer(receipt, offer!, [buyer.address])).toBe(true);
  });

  it('a TICKET answer carries the receipt too', async () => {
    const res = await pay()(`${h.gateway.url}/api/v1/skills/rxt/data`);
    expect(res.status).toBe(200);
    expect(res.headers.get('x-402-mode')).toBe('TICKET');
    const payload = await verifyReceiptSignatureJWS(
      extractReceiptFromResponse(res) as JWSSignedReceipt,
      publishedKey,
    );
    expect(payload).toMatchObject({
      resourceUrl: 'http://paygate.test/api/v1/skills/rxt/data',
      payer: buyer.address,
      outcome: 'served',
      amount: '50000',
    });
  });

  it('a tampered receipt, or one checked with another key, does not verify', async () => {
    const res = await pay()(`${h.gateway.url}/api/v1/skills/rx/data?city=bergen`);
    expect(res.status).toBe(200);
    const receipt = extractReceiptFromResponse(res) as JWSSignedReceipt;
    const [header, body, signature] = receipt.signature.split('.');
    const claimed = JSON.parse(Buffer.from(body!, 'base64url').toString());
    const forged = Buffer.from(JSON.stringify({ ...claimed, amount: '5000000' })).toString('base64url');
    await expect(
      verifyReceiptSignatureJWS(
        { format: 'jws', signature: `${header}.${forged}.${signature}` },
        publishedKey,
      ),
    ).rejects.toThrow();
    const otherKey = new ReceiptSigner(developmentReceiptKey(1), 'http://paygate.test', () => new Date())
      .publicKey;
    await expect(verifyReceiptSignatureJWS(receipt, otherKey)).rejects.toThrow();
    // The untouched receipt still verifies.
    await expect(verifyReceiptSignatureJWS(receipt, publishedKey)).resolves.toMatchObject({
      amount: '50000',
    });
  });

  it('production refuses to start without RECEIPT_SIGNING_KEY, and a key that is not a secp256k1 scalar anywhere', () => {
    const production = {
      ...h.gatewayEnv,
      NODE_ENV: 'production',
      CONFIRMATIONS: '1',
      TICKET_KEY_ENCRYPTION_KEY: 'tk-4b8e1c7a0f3d6b9e2a5c8f1d4b7e0a3c',
      DATABASE_URL: 'postgres://u:p@db.internal:5432/paygate',
      NATS_URL: 'nats://nats.internal:4222',
      OPERATOR_TOKEN: 'op-7c1f0e9a2b4d6c8e0f1a3b5d',
    };
    expect(() => loadConfig(production)).toThrow(/RECEIPT_SIGNING_KEY: must be set in production/);
    expect(() => loadConfig({ ...h.gatewayEnv, RECEIPT_SIGNING_KEY: '0x1234' })).toThrow(
      /RECEIPT_SIGNING_KEY: must be a secp256k1 private key/,
    );
    const key = '0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318';
    expect(() => loadConfig({ ...production, RECEIPT_SIGNING_KEY: key })).not.toThrow();
    // The development key anyone can derive (docker-compose's default) is refused in production.
    const development = developmentReceiptKey(31337).toString('hex');
    expect(() => loadConfig({ ...production, RECEIPT_SIGNING_KEY: development })).toThrow(
      /RECEIPT_SIGNING_KEY: must not be the development key/,
    );
  });
});
