import { createHash, generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import http, { type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { forwardingKeyFromApiKey, parseRequestSignature, requestSigningPayload } from '@paygate/agent-client';
import { verifyPaygateRequest } from '@paygate/gateway-middleware';
import { sellerDispatcher } from '@paygate/net';
import { countStreamMessages, serveForwardingKeysForTests, testWallets, waitFor } from '@paygate/testing';
import express from 'express';
import { RequestSigner } from '../src/proxy/signing';
import { type Harness, skillSnapshot, startHarness, startUpstream } from './harness';

jest.setTimeout(60_000);

describe('gateway-proxy: paid skill URLs in PROXY mode', () => {
  let h: Harness;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  const url = (path: string) => `${h.gateway.url}/api/v1/skills${path}`;

  beforeAll(async () => {
    h = await startHarness('gwproxy', {
      RETRY_WINDOW_SECONDS: '600',
      UPSTREAM_TIMEOUT_MS: '500',
      PROXY_MAX_BODY_BYTES: '4096',
    });
    upstream = await startUpstream();
    await h.publishSkill(
      skillSnapshot({
        name: 'weather',
        apiBaseUrl: `${upstream.url}/seller`,
        endpoints: [
          ...skillSnapshot({ name: 'weather', apiBaseUrl: '' }).endpoints,
          {
            endpointId: 'ep-flaky',
            path: '/flaky',
            method: 'GET',
            description: 'Flaky',
            price: '0.01',
            isHealthy: true,
            active: true,
          },
          {
            endpointId: 'ep-slow',
            path: '/slow',
            method: 'GET',
            description: 'Slow',
            price: '0.01',
            isHealthy: true,
            active: true,
          },
        ],
      }),
    );
    await h.publishSkill(
      skillSnapshot({
        name: 'news',
        apiBaseUrl: `${upstream.url}/seller`,
        type: 'Subscription',
        durationDays: 30,
        holdPeriodHours: 24,
      }),
    );
  });
  afterAll(async () => {
    await upstream?.close();
    await h?.stop();
  });

  it('answers 404 for an unknown skill or path and 405 for a wrong method, with clear bodies', async () => {
    const unknown = await fetch(url('/nope/data'));
    expect(unknown.status).toBe(404);
    expect((await unknown.json()).error).toMatchObject({
      code: 'skill_not_found',
      message: 'no skill named "nope"',
    });
    const noPath = await fetch(url('/weather/missing'));
    expect(noPath.status).toBe(404);
    expect((await noPath.json()).error.code).toBe('endpoint_not_found');
    const wrong = await fetch(url('/weather/data'), { method: 'POST' });
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('GET');
    expect((await wrong.json()).error).toMatchObject({ code: 'method_not_allowed', allowed: ['GET'] });
    const head = await fetch(url('/weather/data'), { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('x-402-price')).toBe('0.05');
    expect(upstream.requests).toHaveLength(0);
  });

  it('answers 402 with everything an agent needs to pay', async () => {
    const res = await fetch(url('/weather/data?city=paris'));
    expect(res.status).toBe(402);
    expect(await res.json()).toEqual({
      price: '0.05',
      description: 'Skill weather: Returns data',
      network: 'local',
      chainId: 31337,
      payTo: testWallets.escrow.address,
      asset: h.usdcAddress,
      resource: 'GET http://paygate.test/api/v1/skills/weather/data',
      confirmations: 1,
      type: 'payPerCall',
      header: 'X-402-Payment',
      mode: 'PROXY',
      skill: 'weather',
      endpoint: { method: 'GET', path: '/data' },
    });
    const sub = await (await fetch(url('/news/data'))).json();
    expect(sub).toMatchObject({ type: 'subscription', durationDays: 30 });
    expect(sub.description).toContain('30 days of access');
  });

  it('answers 400 naming the field for a malformed header', async () => {
    const notBase64 = await fetch(url('/weather/data'), { headers: { 'X-402-Payment': '%%%' } });
    expect(notBase64.status).toBe(400);
    expect((await notBase64.json()).error).toMatchObject({
      code: 'invalid_payment_header',
      field: 'X-402-Payment',
      rule: 'must be Base64',
      message: 'X-402-Payment must be Base64',
    });
    const badField = Buffer.from(JSON.stringify({ txHash: '0x12' })).toString('base64');
    const res = await fetch(url('/weather/data'), { headers: { Payment: badField } });
    expect(res.status).toBe(400);
    expect((await res.json()).error).toMatchObject({
      field: 'X-402-Payment.txHash',
      message: 'X-402-Payment.txHash must be a 0x-prefixed 32-byte hex hash',
    });
  });

  it('forwards a paid call (method, path, query, body, safe headers) and credits it exactly once', async () => {
    const resource = h.resource('POST', 'weather', '/echo');
    const txHash = await h.transfer('buyer', 100_000n);
    const header = await h.header({ txHash, resource, amount: 100_000n });
    const res = await fetch(url('/weather/echo?x=1&y=two'), {
      method: 'POST',
      headers: {
        'X-402-Payment': header,
        'content-type': 'application/json',
        authorization: 'Bearer sk_should_not_leak_0000000000',
        'x-custom': 'kept',
      },
      body: '{"hello":  "world"}',
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-402-receipt')).toBe(txHash);
    expect(res.headers.get('x-seller')).toBe('yes');
    expect(res.headers.get('server-timing')).toMatch(/chain;dur=[\d.]+, paygate;dur=[\d.]+/);
    expect(await res.json()).toEqual({
      ok: true,
      method: 'POST',
      url: '/seller/echo?x=1&y=two',
      body: '{"hello":  "world"}',
    });
    const seen = upstream.requests.at(-1)!;
    expect(seen.headers['x-custom']).toBe('kept');
    expect(seen.headers['x-402-payment']).toBeUndefined();
    expect(seen.headers.authorization).toBeUndefined();
    expect(seen.headers['x-paygate-payer']).toBe(testWallets.buyer.address);
    expect(seen.headers['x-paygate-tx-hash']).toBe(txHash);

    // Presented again: refused, and still credited once whatever the retries.
    const again = await fetch(url('/weather/echo'), {
      method: 'POST',
      headers: { 'X-402-Payment': header },
      body: '{}',
    });
    expect(again.status).toBe(402);
    expect(await again.json()).toMatchObject({ error: 'Invalid payment', reason: 'payment_already_used' });
    // The ledger booked it once, with the claim that came before the call was forwarded (its payment.confirmed
    // is the ledger's); the gateway publishes none.
    const events = h.ledgerPayments(txHash).map((data) => ({ data }));
    expect(events).toHaveLength(1);
    expect(
      (await countStreamMessages(h.bus, 'payment.confirmed')).filter(
        (e) => (e.data as { txHash: string }).txHash === txHash,
      ),
    ).toEqual([]);
    expect(events[0]!.data).toMatchObject({
      source: 'x402',
      sellerId: 'seller-1',
      skillId: 'skill-weather',
      skillName: 'weather',
      endpointId: 'ep-weather-2',
      payer: testWallets.buyer.address,
      amount: '0.1',
      network: 'local',
      chainId: 31337,
      txHash,
      holdPeriodHours: 0,
    });
    expect(typeof (events[0]!.data as { logIndex: number }).logIndex).toBe('number');
  });

  it('serves a subscription payer until the subscription expires', async () => {
    const resource = h.resource('GET', 'news', '/data');
    const txHash = await h.transfer('buyer', 50_000n);
    const header = await h.header({ txHash, resource });
    for (let i = 0; i < 3; i++) {
      const res = await fetch(url('/news/data'), { headers: { 'X-402-Payment': header } });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    // Another endpoint of the same skill is covered only within what was paid (echo costs 0.10).
    const echo = await fetch(url('/news/echo'), {
      method: 'POST',
      headers: { 'X-402-Payment': header },
      body: 'x',
    });
    expect(echo.status).toBe(402);
    expect(await echo.json()).toMatchObject({ reason: 'insufficient_amount' });
    // Someone else presenting the payer's tx with their own signature is refused.
    const thief = await h.header({ txHash, resource, from: 'stranger' });
    const stolen = await fetch(url('/news/data'), { headers: { 'X-402-Payment': thief } });
    expect(stolen.status).toBe(402);
    await stolen.arrayBuffer();
    // Not for another skill.
    const other = await fetch(url('/weather/data'), { headers: { 'X-402-Payment': header } });
    expect(other.status).toBe(402);
    await other.arrayBuffer();
    h.clock.advance(31 * 24 * 60 * 60 * 1000);
    // The same header, still cached on the hot path, is refused once the subscription has expired…
    const expiredCached = await fetch(url('/news/data'), { headers: { 'X-402-Payment': header } });
    expect(expiredCached.status).toBe(402);
    expect(await expiredCached.json()).toMatchObject({ reason: 'subscription_expired' });
    // …and so it is when the claim is read back from Postgres.
    h.gateway.state.payments.forgetCachedClaims();
    const expired = await fetch(url('/news/data'), { headers: { 'X-402-Payment': header } });
    expect(expired.status).toBe(402);
    expect(await expired.json()).toMatchObject({ reason: 'subscription_expired' });
    h.clock.advance(-31 * 24 * 60 * 60 * 1000);
  });

  it("accepts the payer's fresh proof for another resource: a subscription serves it, a spent call is already used", async () => {
    // A subscription paid 0.10 on /news/data; the payer signs a new proof for /news/echo (0.10): served.
    const txHash = await h.transfer('buyer', 100_000n);
    const first = await fetch(url('/news/data'), {
      headers: {
        'X-402-Payment': await h.header({
          txHash,
          resource: h.resource('GET', 'news', '/data'),
          amount: 100_000n,
        }),
      },
    });
    expect(first.status).toBe(200);
    await first.arrayBuffer();
    const fresh = await h.header({ txHash, resource: h.resource('POST', 'news', '/echo'), amount: 100_000n });
    const echo = await fetch(url('/news/echo'), {
      method: 'POST',
      headers: { 'X-402-Payment': fresh },
      body: 'x',
    });
    expect(echo.status).toBe(200);
    await echo.arrayBuffer();
    // A stranger's signature over the new resource is still refused.
    const forged = await h.header({
      txHash,
      resource: h.resource('POST', 'news', '/echo'),
      amount: 100_000n,
      signer: 'stranger',
    });
    const refused = await fetch(url('/news/echo'), {
      method: 'POST',
      headers: { 'X-402-Payment': forged },
      body: 'x',
    });
    expect(refused.status).toBe(402);
    expect(await refused.json()).toMatchObject({ reason: 'invalid_signature' });

    // A pay-per-call spent on /weather/flaky, presented by its payer for /weather/slow: already used, not a bad signature.
    const callTx = await h.transfer('buyer', 10_000n);
    const paid = await fetch(url('/weather/flaky'), {
      headers: {
        'X-402-Payment': await h.header({
          txHash: callTx,
          resource: h.resource('GET', 'weather', '/flaky'),
          amount: 10_000n,
        }),
      },
    });
    expect(paid.status).toBe(200);
    await paid.arrayBuffer();
    const again = await fetch(url('/weather/slow'), {
      headers: {
        'X-402-Payment': await h.header({
          txHash: callTx,
          resource: h.resource('GET', 'weather', '/slow'),
          amount: 10_000n,
        }),
      },
    });
    expect(again.status).toBe(402);
    expect(await again.json()).toMatchObject({ reason: 'payment_already_used', claimedBy: 'x402' });
  });

  it('keeps a payment usable for a retry when the seller fails (5xx or timeout), within the window', async () => {
    upstream.failuresLeft.count = 1;
    const resource = h.resource('GET', 'weather', '/flaky');
    const txHash = await h.transfer('buyer', 10_000n);
    const header = await h.header({ txHash, resource, amount: 10_000n });
    const failed = await fetch(url('/weather/flaky'), { headers: { 'X-402-Payment': header } });
    expect(failed.status).toBe(503);
    expect(failed.headers.get('x-402-retry-until')).toBeTruthy();
    await failed.arrayBuffer();
    const retried = await fetch(url('/weather/flaky'), { headers: { 'X-402-Payment': header } });
    expect(retried.status).toBe(200);
    await retried.arrayBuffer();
    // Served once: now spent.
    const third = await fetch(url('/weather/flaky'), { headers: { 'X-402-Payment': header } });
    expect(third.status).toBe(402);
    await third.arrayBuffer();

    // Timeout: 504, then retry allowed only within the window.
    const slowResource = h.resource('GET', 'weather', '/slow');
    const slowTx = await h.transfer('buyer', 10_000n);
    const slowHeader = await h.header({ txHash: slowTx, resource: slowResource, amount: 10_000n });
    const timedOut = await fetch(url('/weather/slow'), { headers: { 'X-402-Payment': slowHeader } });
    expect(timedOut.status).toBe(504);
    const body = await timedOut.json();
    expect(body.error).toMatchObject({ code: 'upstream_failed', txHash: slowTx });
    // Not usable for another resource.
    const elsewhere = await fetch(url('/weather/flaky'), { headers: { 'X-402-Payment': slowHeader } });
    expect(elsewhere.status).toBe(402);
    await elsewhere.arrayBuffer();
    h.clock.advance(601_000);
    const late = await fetch(url('/weather/slow'), { headers: { 'X-402-Payment': slowHeader } });
    expect(late.status).toBe(402);
    expect(await late.json()).toMatchObject({ reason: 'payment_already_used' });
    h.clock.advance(-601_000);
  });
  it("relays the seller's answer as it came: a large body whole to a slow reader, every Set-Cookie, a 5xx's body; a body cut short cuts the buyer's connection", async () => {
    const big = randomBytes(4 * 1024 * 1024);
    const seller = http.createServer((req, res) => {
      if (req.url === '/s/big') {
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': big.length });
        let at = 0;
        const more = () => {
          while (at < big.length) {
            const chunk = big.subarray(at, at + 65_536);
            at += chunk.length;
            if (!res.write(chunk)) return void res.once('drain', more);
          }
          res.end();
        };
        more();
      } else if (req.url === '/s/cookies') {
        res.setHeader('set-cookie', ['a=1; Path=/', 'b=2; Path=/']);
        res.end('ok');
      } else if (req.url === '/s/down') {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: 'seller broke' }));
      } else {
        // Chunked, then the connection drops: only a cut connection tells the buyer the body is not whole.
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('x'.repeat(1000), () => setTimeout(() => res.socket?.destroy(), 50));
      }
    });
    await new Promise<void>((resolve) => seller.listen(0, '127.0.0.1', resolve));
    const endpoint = (path: string) => ({
      endpointId: `ep-streams${path}`,
      path,
      method: 'GET' as const,
      description: path,
      price: '0.01',
      isHealthy: true,
      active: true,
    });
    await h.publishSkill(
      skillSnapshot({
        name: 'streams',
        apiBaseUrl: `http://127.0.0.1:${(seller.address() as AddressInfo).port}/s`,
        type: 'Subscription',
        durationDays: 30,
        endpoints: ['/big', '/cookies', '/down', '/cut'].map(endpoint),
      }),
    );
    try {
      const txHash = await h.transfer('buyer', 10_000n);
      const header = await h.header({ txHash, resource: h.resource('GET', 'streams', '/big') });

      // A buyer reading slowly: the gateway waits for it rather than holding 4 MiB or dropping bytes. Twice:
      // the first call takes the full path, the second the cached one.
      for (let round = 0; round < 2; round++) {
        const received = await new Promise<{ status: number; body: Buffer }>((resolve, reject) => {
          http
            .get(url('/streams/big'), { headers: { 'X-402-Payment': header } }, (res) => {
              const chunks: Buffer[] = [];
              res.on('data', (chunk: Buffer) => {
                chunks.push(chunk);
                if (chunks.length % 8 === 0) {
                  res.pause();
                  setTimeout(() => res.resume(), 5);
                }
              });
              res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
              res.on('error', reject);
            })
            .on('error', reject);
        });
        expect(received.status).toBe(200);
        expect(received.body.length).toBe(big.length);
        expect(createHash('sha256').update(received.body).digest('hex')).toBe(
          createHash('sha256').update(big).digest('hex'),
        );
      }

      const cookies = await fetch(url('/streams/cookies'), { headers: { 'X-402-Payment': header } });
      expect(cookies.status).toBe(200);
      expect(cookies.headers.getSetCookie()).toEqual(['a=1; Path=/', 'b=2; Path=/']);
      expect(cookies.headers.get('x-402-receipt')).toBe(txHash);
      expect(await cookies.text()).toBe('ok');

      // A seller's 5xx: the buyer reads the seller's own body, with the receipt.
      const down = await fetch(url('/streams/down'), { headers: { 'X-402-Payment': header } });
      expect(down.status).toBe(500);
      expect(down.headers.get('x-402-receipt')).toBe(txHash);
      expect(await down.json()).toEqual({ error: 'seller broke' });

      const cut = await fetch(url('/streams/cut'), { headers: { 'X-402-Payment': header } });
      expect(cut.status).toBe(200);
      await expect(cut.text()).rejects.toThrow();
    } finally {
      seller.closeAllConnections();
      await new Promise((resolve) => seller.close(resolve));
    }
  });

  it('signs every forwarded request; verifyPaygateRequest() refuses an unsigned, forged, stale or replayed one', async () => {
    // The seller's origin, open to anyone who finds it, guarded by the one-line middleware.
    const received: Array<{ url: string; headers: IncomingHttpHeaders; body: string }> = [];
    const app = express();
    app.use(verifyPaygateRequest({ paygateUrl: h.gateway.url }));
    app.post('/origin/echo', (req, res) => {
      received.push({ url: req.originalUrl, headers: req.headers, body: req.rawBody!.toString('utf8') });
      res.json({ paygate: req.paygate, body: req.body });
    });
    const server: Server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      await h.publishSkill(skillSnapshot({ name: 'signed', apiBaseUrl: `${origin}/origin` }));
      const resource = h.resource('POST', 'signed', '/echo');
      const txHash = await h.transfer('buyer', 100_000n);
      const header = await h.header({ txHash, resource, amount: 100_000n });
      const call = (body: string) =>
        fetch(url('/signed/echo?q=1'), {
          method: 'POST',
          headers: { 'X-402-Payment': header, 'content-type': 'application/json' },
          body,
        });

      // Through Paygate: signed, verified, and the seller sees what was paid.
      const paid = await call('{"hello": "world"}');
      expect({ status: paid.status, body: await paid.json() }).toEqual({
        status: 200,
        body: {
          paygate: {
            skill: 'signed',
            txHash: txHash.toLowerCase(),
            payer: testWallets.buyer.address,
            amount: '0.1',
            nonce: expect.any(String),
            signedAt: expect.any(String),
          },
          body: { hello: 'world' },
        },
      });
      // A body over PROXY_MAX_BODY_BYTES never reaches the seller; the payment stays usable.
      const bigTx = await h.transfer('buyer', 100_000n);
      const tooLarge = await fetch(url('/signed/echo'), {
        method: 'POST',
        headers: { 'X-402-Payment': await h.header({ txHash: bigTx, resource, amount: 100_000n }) },
        body: JSON.stringify({ pad: 'x'.repeat(5000) }),
      });
      expect(tooLarge.status).toBe(413);
      expect((await tooLarge.json()).error).toMatchObject({
        code: 'body_too_large',
        txHash: bigTx,
        retryUntil: expect.any(String),
      });
      expect(received).toHaveLength(1);

      const signed = received[0]!;
      expect(parseRequestSignature(signed.headers['x-paygate-signature'] as string)).toBeTruthy();

      const direct = (headers: Record<string, string>, body: string, path = signed.url) =>
        fetch(`${origin}${path}`, { method: 'POST', headers, body }).then(async (res) => ({
          status: res.status,
          reason: (await res.json()).error?.code,
        }));
      const copied: Record<string, string> = {};
      for (const name of [
        'content-type',
        'x-paygate-signature',
        'x-paygate-skill',
        'x-paygate-tx-hash',
        'x-paygate-payer',
        'x-paygate-amount',
      ])
        copied[name] = signed.headers[name] as string;

      // Straight to the origin without Paygate: refused.
      expect(await direct({ 'content-type': 'application/json' }, '{"hello": "world"}')).toEqual({
        status: 401,
        reason: 'missing_signature',
      });
      // The exact signed request again: a replay.
      expect(await direct(copied, signed.body)).toEqual({ status: 401, reason: 'replayed_request' });
      // Forged: another body, path, tx hash or payer under the captured signature.
      expect(await direct(copied, '{"hello": "mallory"}')).toEqual({
        status: 401,
        reason: 'invalid_signature',
      });
      expect(await direct(copied, signed.body, '/origin/echo?q=2')).toEqual({
        status: 401,
        reason: 'invalid_signature',
      });
      expect(await direct({ ...copied, 'x-paygate-tx-hash': `0x${'ab'.repeat(32)}` }, signed.body)).toEqual({
        status: 401,
        reason: 'invalid_signature',
      });
      // Forged: signed by a key that is not Paygate's, under Paygate's kid.
      const theirs = parseRequestSignature(copied['x-paygate-signature'])!;
      const forgedFields = {
        kid: theirs.kid,
        timestamp: Math.floor(Date.now() / 1000),
        nonce: 'forged-nonce-1',
        method: 'POST',
        pathAndQuery: signed.url,
        bodySha256: 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        skill: 'signed',
        txHash: copied['x-paygate-tx-hash']!,
        payer: copied['x-paygate-payer']!,
        amount: copied['x-paygate-amount']!,
      };
      const { privateKey: mallory } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
      const forgedSig = sign('sha256', Buffer.from(requestSigningPayload(forgedFields)), {
        key: mallory,
        dsaEncoding: 'ieee-p1363',
      }).toString('base64url');
      expect(
        await direct(
          {
            ...copied,
            'x-paygate-signature': `v1; kid=${theirs.kid}; t=${forgedFields.timestamp}; nonce=forged-nonce-1; sig=${forgedSig}`,
          },
          '',
        ),
      ).toEqual({ status: 401, reason: 'invalid_signature' });
      // Paygate's own signature, but from more than 5 minutes ago.
      const stale = new RequestSigner(
        h.gateway.state.keys,
        () => new Date(Date.now() - 301_000),
      ).signatureFor(
        'POST',
        signed.url,
        'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        copied,
        null,
      );
      expect(await direct({ ...copied, 'x-paygate-signature': stale }, '')).toEqual({
        status: 401,
        reason: 'stale_signature',
      });
      expect(received).toHaveLength(1);
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });

  it("signs with the seller's forwarding key (kid=sk) when the registry has one; the seller checks it with its sk_ key, and a rotated key is used at once", async () => {
    const firstKey = 'sk_test_hmac_seller_first_key_000';
    const rotatedKey = 'sk_test_hmac_seller_rotated_key_00';
    const keys: Record<string, Buffer> = { 'seller-hmac': forwardingKeyFromApiKey(firstKey) };
    const registry = await serveForwardingKeysForTests(h.bus, keys);
    let secretKey = firstKey;
    const seen: string[] = [];
    const app = express();
    // The seller's origin: the middleware is rebuilt per request only so this test can swap the seller's key.
    app.use((req, res, next) =>
      verifyPaygateRequest({ paygateUrl: h.gateway.url, secretKey })(req, res, next),
    );
    app.get('/origin/data', (req, res) => {
      seen.push(req.header('x-paygate-signature')!);
      res.json({ paid: req.paygate?.txHash });
    });
    const server: Server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      await h.publishSkill(
        skillSnapshot({ name: 'hmac-signed', sellerId: 'seller-hmac', apiBaseUrl: `${origin}/origin` }),
      );
      const pay = async () => {
        const resource = h.resource('GET', 'hmac-signed', '/data');
        const txHash = await h.transfer('buyer', 50_000n);
        const res = await fetch(url('/hmac-signed/data'), {
          headers: { 'X-402-Payment': await h.header({ txHash, resource, amount: 50_000n }) },
        });
        return { status: res.status, body: await res.json(), txHash: txHash.toLowerCase() };
      };
      const first = await pay();
      expect(first).toMatchObject({ status: 200, body: { paid: first.txHash } });
      expect(parseRequestSignature(seen[0])).toMatchObject({ kid: 'sk' });

      // The seller rotates its API key: the registry derives the new forwarding key and publishes seller.updated.
      keys['seller-hmac'] = forwardingKeyFromApiKey(rotatedKey);
      secretKey = rotatedKey;
      h.bus.nc.publish(
        h.bus.subjectFor('seller.updated'),
        new TextEncoder().encode(JSON.stringify({ data: { sellerId: 'seller-hmac' } })),
      );
      await h.bus.nc.flush();
      const second = await waitFor(async () => {
        const answer = await pay();
        return answer.status === 200 && answer;
      });
      expect(second.body).toEqual({ paid: second.txHash });
      expect(parseRequestSignature(seen.at(-1))).toMatchObject({ kid: 'sk' });
    } finally {
      await registry.stop();
      server.closeAllConnections();
      server.close();
    }
  });

  it('during an API-key rotation overlap signs with both forwarding keys: an origin holding either key passes, the old one stops when the overlap ends', async () => {
    const oldKey = 'sk_test_overlap_seller_old_key_000';
    const newKey = 'sk_test_overlap_seller_new_key_000';
    const keys: Parameters<typeof serveForwardingKeysForTests>[1] = {
      'seller-overlap': {
        key: forwardingKeyFromApiKey(newKey),
        previous: forwardingKeyFromApiKey(oldKey),
        previousExpiresAt: new Date(Date.now() + 60 * 60_000),
      },
    };
    const registry = await serveForwardingKeysForTests(h.bus, keys);
    let originKeys: string | string[] = oldKey;
    const seen: string[] = [];
    const app = express();
    app.use((req, _res, next) => {
      seen.push(req.header('x-paygate-signature')!);
      next();
    });
    app.use((req, res, next) =>
      verifyPaygateRequest({ paygateUrl: h.gateway.url, secretKey: originKeys })(req, res, next),
    );
    app.get('/origin/data', (req, res) => {
      res.json({ paid: req.paygate?.txHash });
    });
    const server: Server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      await h.publishSkill(
        skillSnapshot({ name: 'overlap-signed', sellerId: 'seller-overlap', apiBaseUrl: `${origin}/origin` }),
      );
      const pay = async () => {
        const resource = h.resource('GET', 'overlap-signed', '/data');
        const txHash = await h.transfer('buyer', 50_000n);
        const res = await fetch(url('/overlap-signed/data'), {
          headers: { 'X-402-Payment': await h.header({ txHash, resource, amount: 50_000n }) },
        });
        return { status: res.status, body: await res.json(), txHash: txHash.toLowerCase() };
      };
      // The origin still holds the old key: it passes through sig_prev.
      const withOld = await pay();
      expect(withOld).toMatchObject({ status: 200, body: { paid: withOld.txHash } });
      const header = parseRequestSignature(seen.at(-1));
      expect(header).toMatchObject({ kid: 'sk', previousSignature: expect.any(String) });
      // Moved to the new key (or holding both while it moves): passes through sig.
      originKeys = newKey;
      expect((await pay()).status).toBe(200);
      originKeys = [newKey, oldKey];
      expect((await pay()).status).toBe(200);

      // The overlap ends: the registry drops the old key and publishes seller.updated; only the new key passes.
      keys['seller-overlap'] = forwardingKeyFromApiKey(newKey);
      h.bus.nc.publish(
        h.bus.subjectFor('seller.updated'),
        new TextEncoder().encode(JSON.stringify({ data: { sellerId: 'seller-overlap' } })),
      );
      await h.bus.nc.flush();
      originKeys = oldKey;
      await waitFor(async () => (await pay()).status !== 200, { message: 'the old key still passes' });
      expect(parseRequestSignature(seen.at(-1))?.previousSignature).toBeUndefined();
      originKeys = newKey;
      expect((await pay()).status).toBe(200);
      expect(parseRequestSignature(seen.at(-1))?.previousSignature).toBeUndefined();
    } finally {
      await registry.stop();
      server.closeAllConnections();
      server.close();
    }
  });

  it('in production, refuses at connect time a seller host that resolves to loopback (502); development connects', async () => {
    const port = new URL(upstream.url).port;
    await h.publishSkill(
      skillSnapshot({ name: 'rebound', apiBaseUrl: `http://api.rebind.test:${port}/seller` }),
    );
    // The seller's DNS, as after a rebinding: its API host is this machine.
    const dns = async (host: string) => {
      if (host === 'api.rebind.test') return ['127.0.0.1'];
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    };
    const original = h.gateway.state.forwarding.dispatcher;
    const production = sellerDispatcher({ publicOnly: true, resolve: dns });
    const development = sellerDispatcher({ publicOnly: false, resolve: dns });
    try {
      h.gateway.state.forwarding.dispatcher = production;
      const resource = h.resource('GET', 'rebound', '/data');
      const txHash = await h.transfer('buyer', 50_000n);
      const header = await h.header({ txHash, resource, amount: 50_000n });
      const before = upstream.requests.length;
      const refused = await fetch(url('/rebound/data'), { headers: { 'X-402-Payment': header } });
      expect(refused.status).toBe(502);
      expect((await refused.json()).error).toMatchObject({
        code: 'upstream_failed',
        message:
          "the seller's API failed: refused to connect to api.rebind.test: it resolves to 127.0.0.1, a loopback, private, link-local or reserved address (production rule, checked at connect time)",
        txHash,
      });
      expect(upstream.requests.length).toBe(before);

      // The payment stays usable for a retry; in development the same DNS answer connects.
      h.gateway.state.forwarding.dispatcher = development;
      const served = await fetch(url('/rebound/data'), { headers: { 'X-402-Payment': header } });
      expect(served.status).toBe(200);
      await served.arrayBuffer();
      expect(upstream.requests.slice(before).map((r) => r.url)).toEqual(['/seller/data']);
    } finally {
      h.gateway.state.forwarding.dispatcher = original;
      await Promise.all([production.close(), development.close()]);
    }
  });
});
