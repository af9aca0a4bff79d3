import { type Harness, startHarness } from './helpers';

let h: Harness;
beforeAll(async () => {
  h = await startHarness('regdash');
});
afterAll(async () => {
  await h?.stop();
});

describe('the seller dashboard served under /dashboard', () => {
  it('answers every dashboard path with the page, locked down by its content security policy', async () => {
    for (const path of ['/dashboard', '/dashboard/', '/dashboard/skills/weather-now']) {
      const page = await fetch(`${h.url}${path}`);
      expect([path, page.status]).toEqual([path, 200]);
      expect(page.headers.get('content-type')).toContain('text/html');
      expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
      expect(page.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
      expect(page.headers.get('cache-control')).toBe('no-store');
      expect(await page.text()).toContain('<script type="module" src="/dashboard/assets/app.js">');
    }
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
});
