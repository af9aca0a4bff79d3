import { createHash } from 'node:crypto';
import http from 'node:http';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { signUpSeller } from '@paygate/testing';
import { Wallet } from 'ethers';
import { api, type Harness, startHarness } from './helpers';

/** A raw GET (fetch would decompress): status, headers and the bytes as sent. */
function rawGet(url: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }>(
    (resolve, reject) => {
      const request = http.get(url, { headers, timeout: 30_000 }, (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            headers: response.headers,
            body: Buffer.concat(chunks),
          }),
        );
      });
      request.on('timeout', () => request.destroy(new Error('timed out')));
      request.on('error', reject);
    },
  );
}

/** The cookie the first screen sets once this build's files are cached. */
async function buildCookie(): Promise<string> {
  const html = (await rawGet(`${h.url}/dashboard/`)).body.toString('utf8');
  return `paygate_dashboard_build=${/data-build-id="([0-9a-f]{16})"/.exec(html)![1]}`;
}

let h: Harness;
beforeAll(async () => {
  h = await startHarness('regdash');
});
afterAll(async () => {
  await h?.stop();
});

describe('the seller dashboard served under /dashboard', () => {
  it('answers every dashboard path with the page, locked down by its content security policy', async () => {
    const cookie = await buildCookie();
    for (const path of ['/dashboard', '/dashboard/', '/dashboard/skills/weather-now']) {
      // With this build's files cached (the cookie the first screen sets): the page links them.
      const page = await fetch(`${h.url}${path}`, { headers: { cookie } });
      expect([path, page.status]).toEqual([path, 200]);
      expect(page.headers.get('content-type')).toContain('text/html');
      expect(page.headers.get('content-security-policy')).toContain("script-src 'self';");
      expect(page.headers.get('content-security-policy')).toContain("style-src 'self';");
      expect(page.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
      expect(page.headers.get('cache-control')).toBe('no-store');
      expect(page.headers.get('vary')).toContain('Cookie');
      expect(await page.text()).toMatch(
        /<script type="module" src="\/dashboard\/assets\/app\.[0-9a-f]{16}\.js">/,
      );
    }
  });

  it("inlines the first visit's style sheet and sign-in script, allowed by their hashes only, compressed", async () => {
    const first = await rawGet(`${h.url}/dashboard/`, { 'accept-encoding': 'br' });
    expect(first.headers['content-encoding']).toBe('br');
    const html = brotliDecompressSync(first.body).toString('utf8');
    const script = /<script type="module">([\s\S]*?)<\/script>/.exec(html)![1]!;
    const style = /<style>([\s\S]*?)<\/style>/.exec(html)![1]!;
    expect(script).toContain('/api/v1/auth/siwe/nonce');
    expect(style.length).toBeGreaterThan(10_000);
    // The CSP names exactly these two inline elements, by hash: no 'unsafe-inline'.
    const csp = String(first.headers['content-security-policy']);
    const hash = (text: string) => `'sha256-${createHash('sha256').update(text).digest('base64')}'`;
    expect(csp).toContain(`script-src 'self' ${hash(script)};`);
    expect(csp).toContain(`style-src 'self' ${hash(style)};`);
    expect(csp).not.toContain('unsafe-inline');
    // The app it loads after sign-in, and the build id for the cookie, are named on the root element.
    expect(html).toMatch(/data-app-src="\/dashboard\/assets\/app\.[0-9a-f]{16}\.js"/);
    // What a first visit downloads before its first screen: this page alone.
    expect(first.body.length).toBeLessThan(30_000);
    // A cookie of another build is no cache: the page is inlined again.
    const stale = await rawGet(`${h.url}/dashboard/`, { cookie: 'paygate_dashboard_build=0000000000000000' });
    expect(stale.body.toString('utf8')).toContain('<script type="module">');
  });

  it('serves the bundle built from libs/seller-dashboard (script and stylesheet)', async () => {
    const js = await fetch(`${h.url}/dashboard/assets/app.js`);
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toContain('text/javascript');
    expect(await js.text()).toContain('/api/v1/auth/siwe/nonce');
    const css = await fetch(`${h.url}/dashboard/assets/app.css`);
    expect(css.headers.get('content-type')).toContain('text/css');
    expect((await css.text()).length).toBeGreaterThan(10_000);
  });

  it('sends the hashed bundle compressed (brotli, else gzip), cached for a year, and answers 304 when unchanged', async () => {
    const html = await (
      await fetch(`${h.url}/dashboard/`, { headers: { cookie: await buildCookie() } })
    ).text();
    const js = /src="(\/dashboard\/assets\/app\.[0-9a-f]{16}\.js)"/.exec(html)![1]!;
    const css = /href="(\/dashboard\/assets\/app\.[0-9a-f]{16}\.css)"/.exec(html)![1]!;
    const plain = await rawGet(`${h.url}${js}`);
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(plain.headers.vary).toContain('Accept-Encoding');
    const br = await rawGet(`${h.url}${js}`, { 'accept-encoding': 'gzip, deflate, br' });
    expect(br.headers['content-encoding']).toBe('br');
    expect(brotliDecompressSync(br.body).equals(plain.body)).toBe(true);
    expect(br.body.length).toBeLessThan(plain.body.length / 2.5);
    const gz = await rawGet(`${h.url}${css}`, { 'accept-encoding': 'gzip' });
    expect(gz.headers['content-encoding']).toBe('gzip');
    expect(gz.headers['content-type']).toContain('text/css');
    expect(gunzipSync(gz.body).length).toBeGreaterThan(10_000);
    const refused = await rawGet(`${h.url}${js}`, { 'accept-encoding': 'br;q=0, gzip;q=0' });
    expect(refused.headers['content-encoding']).toBeUndefined();
    const again = await rawGet(`${h.url}${js}`, { 'if-none-match': String(plain.headers.etag) });
    expect(again.status).toBe(304);
    // The unhashed names serve the same files, revalidated each time (pages loaded before a deploy).
    const unhashed = await rawGet(`${h.url}/dashboard/assets/app.js`);
    expect(unhashed.headers['cache-control']).toBe('no-cache');
    expect(unhashed.body.equals(plain.body)).toBe(true);
  });

  it('tells the create form whether a skill name is free, for any seller, and names a malformed one', async () => {
    const seller = await signUpSeller(h.url, Wallet.createRandom());
    const other = await signUpSeller(h.url, Wallet.createRandom());
    const name = `dash-name-${Date.now().toString(36)}`;
    const check = (token: string, value: string) =>
      api(h.url, 'GET', `/api/v1/manage/skill-names/${value}`, { token });
    expect((await check(seller.apiKey, name)).body).toEqual({ name, available: true });
    const created = await api(h.url, 'POST', '/api/v1/manage/skills', {
      token: seller.apiKey,
      body: {
        name,
        displayName: 'Name check',
        description: 'A skill whose name is taken.',
        apiBaseUrl: 'http://127.0.0.1:9',
        type: 'API',
      },
    });
    expect(created.status).toBe(201);
    // Taken for everyone, the owner included (names are unique across Paygate).
    expect((await check(other.apiKey, name)).body).toEqual({ name, available: false, reason: 'taken' });
    expect((await check(seller.apiKey, name)).body).toMatchObject({ available: false });
    const malformed = await check(seller.apiKey, 'Not_A_Slug');
    expect(malformed.status).toBe(400);
    expect(malformed.body.error).toMatchObject({ field: expect.stringContaining('name') });
    expect((await api(h.url, 'GET', `/api/v1/manage/skill-names/${name}`)).status).toBe(401);
  });
});
