import { createHash, createPublicKey, generateKeyPairSync, sign } from 'node:crypto';
import http, { type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  FORWARDING_KEY_ID,
  formatRequestSignature,
  forwardingKeyFromApiKey,
  forwardingSignature,
  requestSigningPayload,
} from '@paygate/agent-client';
import express from 'express';
import { MemoryReplayStore, verifyPaygateRequest } from '../src';

/**
 * verifyPaygateRequest's body handling and bounds, against a JWKS served here (the signed forwards through the real
 * gateway: services/gateway-proxy/test/proxy.test.ts).
 */
describe('verifyPaygateRequest', () => {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = createPublicKey(privateKey).export({ format: 'jwk' });
  const kid = 'test-key';
  let jwks: Server;
  let paygateUrl: string;
  let nonce = 0;

  beforeAll(async () => {
    jwks = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ keys: [{ ...jwk, kid, alg: 'ES256', use: 'sig' }] }));
    });
    await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
    paygateUrl = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise((resolve) => jwks.close(resolve)));

  /** Headers as the gateway sends them: ES256 by the JWKS key, or (`bySecretKey`) HMAC with that key's forwarding key. */
  function signedHeaders(
    method: string,
    pathAndQuery: string,
    body: string,
    bySecretKey?: string,
  ): Record<string, string> {
    const paid = { skill: 'weather', txHash: `0x${'12'.repeat(32)}`, payer: '0xabc', amount: '0.05' };
    const fields = {
      kid: bySecretKey ? FORWARDING_KEY_ID : kid,
      timestamp: Math.floor(Date.now() / 1000),
      nonce: `n-${++nonce}`,
      method,
      pathAndQuery,
      bodySha256: createHash('sha256').update(body).digest('hex'),
      ...paid,
    };
    const payload = requestSigningPayload(fields);
    const signature = bySecretKey
      ? forwardingSignature(forwardingKeyFromApiKey(bySecretKey), payload)
      : sign('sha256', Buffer.from(payload), { key: privateKey, dsaEncoding: 'ieee-p1363' }).toString(
          'base64url',
        );
    return {
      'content-type': 'application/json',
      'x-paygate-signature': formatRequestSignature({ ...fields, signature }),
      'x-paygate-skill': paid.skill,
      'x-paygate-tx-hash': paid.txHash,
      'x-paygate-payer': paid.payer,
      'x-paygate-amount': paid.amount,
    };
  }

  async function serve(app: express.Express, run: (url: string) => Promise<void>): Promise<void> {
    const server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    try {
      await run(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  }

  it('reads the body itself (req.rawBody, JSON on req.body), or takes the bytes a parser kept; refuses a parsed body it cannot hash', async () => {
    const body = '{"city":  "Porto"}';
    const first = express();
    first.use(verifyPaygateRequest({ paygateUrl }));
    first.use(express.json());
    first.post('/echo', (req, res) => res.json({ body: req.body, raw: req.rawBody?.toString() }));
    await serve(first, async (url) => {
      const res = await fetch(`${url}/echo?a=1`, {
        method: 'POST',
        headers: signedHeaders('POST', '/echo?a=1', body),
        body,
      });
      expect(await res.json()).toEqual({ body: { city: 'Porto' }, raw: body });
    });

    const kept = express();
    kept.use(
      express.json({
        verify: (req, _res, buf) => {
          (req as express.Request).rawBody = buf;
        },
      }),
    );
    kept.use(verifyPaygateRequest({ paygateUrl }));
    kept.post('/echo', (req, res) => res.json({ city: req.body.city, paid: req.paygate?.skill }));
    await serve(kept, async (url) => {
      const res = await fetch(`${url}/echo`, {
        method: 'POST',
        headers: signedHeaders('POST', '/echo', body),
        body,
      });
      expect(await res.json()).toEqual({ city: 'Porto', paid: 'weather' });
    });

    const parsedFirst = express();
    parsedFirst.use(express.json());
    parsedFirst.use(verifyPaygateRequest({ paygateUrl }));
    parsedFirst.post('/echo', (_req, res) => res.json({ served: true }));
    await serve(parsedFirst, async (url) => {
      const res = await fetch(`${url}/echo`, {
        method: 'POST',
        headers: signedHeaders('POST', '/echo', body),
        body,
      });
      expect(res.status).toBe(500);
      expect((await res.json()).error).toEqual({ code: 'body_unavailable', message: expect.any(String) });
    });
  });

  it('refuses a body over maxBodyBytes and a request for another skill', async () => {
    const app = express();
    app.use('/small', verifyPaygateRequest({ paygateUrl, maxBodyBytes: 10 }));
    app.use('/other', verifyPaygateRequest({ paygateUrl, skills: ['news'] }));
    app.post(['/small', '/other'], (_req, res) => res.json({ served: true }));
    await serve(app, async (url) => {
      const body = '{"city": "Porto"}';
      const large = await fetch(`${url}/small`, {
        method: 'POST',
        headers: signedHeaders('POST', '/small', body),
        body,
      });
      expect({ status: large.status, reason: (await large.json()).error.code }).toEqual({
        status: 413,
        reason: 'body_too_large',
      });
      const other = await fetch(`${url}/other`, {
        method: 'POST',
        headers: signedHeaders('POST', '/other', body),
        body,
      });
      expect({ status: other.status, reason: (await other.json()).error.code }).toEqual({
        status: 403,
        reason: 'wrong_skill',
      });
    });
  });

  it('checks a signature made with the key derived from the secret API key (kid=sk): accepts it once, refuses another key, a tampered body, or no secret key configured', async () => {
    const secretKey = 'sk_test_0123456789abcdefghijklmn';
    const app = express();
    app.use('/mine', verifyPaygateRequest({ paygateUrl, secretKey }));
    app.use('/unconfigured', verifyPaygateRequest({ paygateUrl }));
    app.post(['/mine', '/unconfigured'], (req, res) => res.json({ paid: req.paygate }));
    const body = '{"city": "Porto"}';
    await serve(app, async (url) => {
      const post = async (path: string, headers: Record<string, string>, sent = body) => {
        const res = await fetch(`${url}${path}`, { method: 'POST', headers, body: sent });
        const json = await res.json();
        return { status: res.status, reason: json.error?.code, skill: json.paid?.skill };
      };
      const signed = signedHeaders('POST', '/mine', body, secretKey);
      expect(await post('/mine', signed)).toEqual({ status: 200, skill: 'weather' });
      expect(await post('/mine', signed)).toEqual({ status: 401, reason: 'replayed_request' });
      expect(
        await post('/mine', signedHeaders('POST', '/mine', body, 'sk_test_someone_else_s_key_0000')),
      ).toEqual({
        status: 401,
        reason: 'invalid_signature',
      });
      expect(
        await post('/mine', signedHeaders('POST', '/mine', body, secretKey), '{"city": "Oslo"}'),
      ).toEqual({
        status: 401,
        reason: 'invalid_signature',
      });
      // An ES256 signature (an account whose key predates forwarding keys) still passes where a secret key is set.
      expect(await post('/mine', signedHeaders('POST', '/mine', body))).toEqual({
        status: 200,
        skill: 'weather',
      });
      expect(await post('/unconfigured', signedHeaders('POST', '/unconfigured', body, secretKey))).toEqual({
        status: 401,
        reason: 'secret_key_required',
      });
    });
    expect(() => verifyPaygateRequest({ secretKey: 'pk_test_not_a_secret_key' })).toThrow(/sk_/);
  });

  it('during a key rotation overlap passes a request whose sig or sig_prev was made with a key it holds; one key or both', async () => {
    const oldKey = 'sk_test_old_key_0123456789abcdefgh';
    const newKey = 'sk_test_new_key_0123456789abcdefgh';
    const app = express();
    app.use('/old', verifyPaygateRequest({ paygateUrl, secretKey: oldKey }));
    app.use('/new', verifyPaygateRequest({ paygateUrl, secretKey: newKey }));
    app.use('/both', verifyPaygateRequest({ paygateUrl, secretKey: [newKey, oldKey] }));
    app.use('/other', verifyPaygateRequest({ paygateUrl, secretKey: 'sk_test_someone_else_s_key_0000' }));
    app.post(['/old', '/new', '/both', '/other'], (req, res) => res.json({ paid: req.paygate }));
    const body = '{"city": "Porto"}';
    /** As the gateway signs during the overlap: sig by the new key, sig_prev by the old one. */
    const overlapHeaders = (path: string, previous?: string) => {
      const headers = signedHeaders('POST', path, body, newKey);
      const parsed = headers['x-paygate-signature']!.match(/t=(\d+); nonce=([^;]+);/)!;
      const paid = { skill: 'weather', txHash: `0x${'12'.repeat(32)}`, payer: '0xabc', amount: '0.05' };
      const payload = requestSigningPayload({
        kid: FORWARDING_KEY_ID,
        timestamp: Number(parsed[1]),
        nonce: parsed[2]!,
        method: 'POST',
        pathAndQuery: path,
        bodySha256: createHash('sha256').update(body).digest('hex'),
        ...paid,
      });
      const previousSignature = previous ?? forwardingSignature(forwardingKeyFromApiKey(oldKey), payload);
      return {
        ...headers,
        'x-paygate-signature': `${headers['x-paygate-signature']}; sig_prev=${previousSignature}`,
      };
    };
    await serve(app, async (url) => {
      const post = async (path: string, headers: Record<string, string>) => {
        const res = await fetch(`${url}${path}`, { method: 'POST', headers, body });
        const json = await res.json();
        return { status: res.status, reason: json.error?.code };
      };
      for (const path of ['/old', '/new', '/both'])
        expect({ path, ...(await post(path, overlapHeaders(path))) }).toEqual({ path, status: 200 });
      expect(await post('/other', overlapHeaders('/other'))).toEqual({
        status: 401,
        reason: 'invalid_signature',
      });
      // Without sig_prev (no overlap, or it ended) the old key no longer passes.
      expect(await post('/old', signedHeaders('POST', '/old', body, newKey))).toEqual({
        status: 401,
        reason: 'invalid_signature',
      });
      expect(await post('/both', signedHeaders('POST', '/both', body, oldKey))).toEqual({ status: 200 });
      // A malformed sig_prev makes the header malformed.
      expect(await post('/old', overlapHeaders('/old', 'short'))).toEqual({
        status: 401,
        reason: 'malformed_signature',
      });
    });
  });

  it('MemoryReplayStore stays bounded: when full, the oldest id is forgotten first', () => {
    const store = new MemoryReplayStore(3);
    const later = Date.now() + 60_000;
    for (const id of ['a', 'b', 'c']) expect(store.markUsed(id, later)).toBe(true);
    expect(store.markUsed('c', later)).toBe(false);
    expect(store.markUsed('d', later)).toBe(true);
    expect(store.markUsed('b', later)).toBe(false);
    expect(store.markUsed('a', later)).toBe(true);
  });
});
