import { createActiveSkill, EventRecorder, signUpSeller } from '@paygate/testing';
import { Wallet } from 'ethers';
import { parse as parseYaml } from 'yaml';
import { api, type Harness, PUBLIC_BASE_URL, startHarness, startSellerApi } from './helpers';

let h: Harness;
let sellerApi: Awaited<ReturnType<typeof startSellerApi>>;
let seller: Awaited<ReturnType<typeof signUpSeller>>;

beforeAll(async () => {
  h = await startHarness('regskill', { HEALTH_INTERVAL_MS: '300' });
  sellerApi = await startSellerApi();
  seller = await signUpSeller(h.url, Wallet.createRandom());
});
afterAll(async () => {
  await sellerApi?.close();
  await h?.stop();
});

describe('skills', () => {
  it('creates a skill, validates it with HEAD requests to ACTIVE and publishes skill.updated', async () => {
    const recorder = new EventRecorder(await h.env.bus(), 'skill.updated');
    const skill = await createActiveSkill(h.url, seller.apiKey, {
      name: 'weather-now',
      type: 'API',
      apiBaseUrl: sellerApi.url,
      categories: 'Weather, data',
      endpoints: [
        { path: '/forecast', method: 'GET', priceUsdc: '0.05', description: 'Forecast for a city' },
        { path: '/alerts', method: 'POST', priceUsdc: 1.25, description: 'Weather alerts' },
      ],
    });
    expect(skill.status).toBe('ACTIVE');
    expect(skill.holdPeriodHours).toBe(0);
    expect(skill.categories).toEqual(['weather', 'data']);
    expect(skill.endpoints.map((e) => [e.method, e.path, e.priceUsdc, e.url])).toEqual([
      ['GET', '/forecast', '0.05', `${PUBLIC_BASE_URL}/api/v1/skills/weather-now/forecast`],
      ['POST', '/alerts', '1.25', `${PUBLIC_BASE_URL}/api/v1/skills/weather-now/alerts`],
    ]);
    expect(sellerApi.hits).toEqual(expect.arrayContaining(['HEAD /forecast', 'HEAD /alerts']));

    const events = await recorder.waitForCount(2);
    const last = events[events.length - 1]!.data as any;
    expect(last).toMatchObject({
      skillId: skill.skillId,
      sellerId: seller.sellerId,
      name: 'weather-now',
      status: 'ACTIVE',
      holdPeriodHours: 0,
    });
    expect(last.endpoints.map((e: any) => [e.method, e.path, e.price, e.active])).toEqual([
      ['GET', '/forecast', '0.05', true],
      ['POST', '/alerts', '1.25', true],
    ]);
    expect(events.map((e: any) => e.data.revision)).toEqual(
      [...events.map((e: any) => e.data.revision)].sort((a, b) => a - b),
    );
    recorder.stop();

    // Public SKILL.md
    const md = await api(h.url, 'GET', '/api/v1/skills/weather-now/SKILL.md');
    expect(md.status).toBe(200);
    expect(md.headers.get('content-type')).toMatch(/^text\/markdown/);
    const front = parseYaml(/^---\n([\s\S]*?)\n---/.exec(md.text)![1]!);
    expect(Object.keys(front)).toEqual(['name', 'base_url', 'version', 'description', 'endpoints']);
    expect(front.name).toBe('weather-now');
    expect(front.base_url).toBe(`${PUBLIC_BASE_URL}/api/v1/skills/weather-now`);
    expect(typeof front.version).toBe('string');
    expect(front.endpoints).toEqual([
      { path: '/forecast', method: 'GET', price: '$0.05', description: 'Forecast for a city' },
      { path: '/alerts', method: 'POST', price: '$1.25', description: 'Weather alerts' },
    ]);
    expect(md.text).toContain('## How to pay');
    expect(md.text).toContain('402');
    expect(md.text).toContain('## Endpoints');
    expect(md.text).toContain('### GET /forecast — $0.05');
    expect(md.text).toContain(`Request: \`GET ${PUBLIC_BASE_URL}/api/v1/skills/weather-now/forecast\``);

    // Catalog
    const catalog = await api(h.url, 'GET', '/api/v1/skills?category=weather');
    expect(catalog.status).toBe(200);
    expect(catalog.body.data.map((s: any) => s.name)).toContain('weather-now');
    expect(catalog.body.data[0].apiBaseUrl).toBeUndefined();
  });
});
