import { idempotentWithClaim } from '@paygate/http';
import { createActiveSkill, EventRecorder, signUpSeller } from '@paygate/testing';
import { Wallet } from 'ethers';
import { sql } from 'kysely';
import { parse as parseYaml } from 'yaml';
import { loadConfig, startRegistry } from '../src';
import { registryClaims } from '../src/shared/idempotency';
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

const validSkill = (overrides: Record<string, unknown> = {}) => ({
  name: `s-${Math.random().toString(36).slice(2, 10)}`,
  displayName: 'A skill',
  description: 'Does useful things for agents.',
  apiBaseUrl: 'http://127.0.0.1:9',
  type: 'API',
  ...overrides,
});

describe('skill rules: every violated rule is a 400 naming the field and the rule', () => {
  it.each([
    [{ name: 'Not-Kebab' }, 'name', /kebab-case/],
    [{ name: 'double--hyphen' }, 'name', /kebab-case/],
    [{ name: undefined }, 'name', /required/],
    [{ displayName: '' }, 'displayName', /at least 1/],
    [{ description: 'too short' }, 'description', /at least 10/],
    [{ apiBaseUrl: 'not a url' }, 'apiBaseUrl', /absolute URL/],
    [{ apiBaseUrl: 'ftp://example.com' }, 'apiBaseUrl', /http or https/],
    [{ apiBaseUrl: 'https://user:pw@example.com' }, 'apiBaseUrl', /credentials/],
    [{ mode: 'DIRECT' }, 'mode', /PROXY, TICKET/],
    [{ type: 'Gadget' }, 'type', /API, SaaS, Product, Service, Subscription, Content/],
    [{ type: 'SaaS' }, 'durationDays', /required for type SaaS/],
    [{ type: 'Subscription' }, 'durationDays', /required for type Subscription/],
    [{ type: 'API', durationDays: 30 }, 'durationDays', /only allowed for types SaaS and Subscription/],
    [{ type: 'API', requiresShipping: true }, 'requiresShipping', /only allowed for type Product/],
    [{ holdPeriodHours: 169 }, 'holdPeriodHours', /168/],
    [{ holdPeriodHours: -1 }, 'holdPeriodHours', /0/],
    [{ holdPeriodHours: 1.5 }, 'holdPeriodHours', /integer/],
    [{ categories: ['ok', 'Bad!'] }, 'categories', /lowercase/],
    [
      { endpoints: [{ path: 'no-slash', method: 'GET', priceUsdc: '1' }] },
      'endpoints.0.path',
      /start with \//,
    ],
    [{ endpoints: [{ path: '/SKILL.md', method: 'GET', priceUsdc: '1' }] }, 'endpoints.0.path', /reserved/],
    [{ endpoints: [{ path: '/a/../b', method: 'GET', priceUsdc: '1' }] }, 'endpoints.0.path', /\.\./],
    [
      { endpoints: [{ path: '/a', method: 'HEAD', priceUsdc: '1' }] },
      'endpoints.0.method',
      /GET, POST, PUT, PATCH, DELETE/,
    ],
    [
      { endpoints: [{ path: '/a', method: 'GET', priceUsdc: '0.0000001' }] },
      'endpoints.0.priceUsdc',
      /6 decimal/,
    ],
    [{ endpoints: [{ path: '/a', method: 'GET', priceUsdc: 0 }] }, 'endpoints.0.priceUsdc', /greater than 0/],
    [{ endpoints: [{ path: '/a', method: 'GET', priceUsdc: '-1' }] }, 'endpoints.0.priceUsdc', /negative/],
    [
      {
        endpoints: [
          { path: '/a', method: 'GET', priceUsdc: '1' },
          { path: '/a', method: 'GET', priceUsdc: '2' },
        ],
      },
      'endpoints.1.path',
      /unique per method.*GET \/a is endpoints\.0/,
    ],
    [{ extra: true }, 'extra', /not an allowed field/],
  ])('%j -> %s', async (overrides, field, rule) => {
    const body = validSkill(overrides);
    const response = await api(h.url, 'POST', '/api/v1/manage/skills', { token: seller.apiKey, body });
    expect(response.status).toBe(400);
    expect(response.body.error.field).toBe(field);
    expect(response.body.error.rule).toMatch(rule);
  });

  it('defaults the hold period by type and the mode to PROXY; names are unique across sellers', async () => {
    const expected = { API: 0, Content: 0, SaaS: 24, Subscription: 24, Service: 48, Product: 72 } as const;
    for (const [type, hold] of Object.entries(expected)) {
      const body = validSkill({
        type,
        ...(type === 'SaaS' || type === 'Subscription' ? { durationDays: 30 } : {}),
      });
      const created = await api(h.url, 'POST', '/api/v1/manage/skills', { token: seller.apiKey, body });
      expect(created.status).toBe(201);
      expect([type, created.body.holdPeriodHours, created.body.mode, created.body.status]).toEqual([
        type,
        hold,
        'PROXY',
        'PENDING_VALIDATION',
      ]);
      if (type === 'Product') expect(created.body.requiresShipping).toBe(false);
    }
    const other = await signUpSeller(h.url, Wallet.createRandom());
    const taken = await api(h.url, 'POST', '/api/v1/manage/skills', {
      token: other.apiKey,
      body: validSkill({ name: 'weather-now' }),
    });
    expect(taken.status).toBe(409);
    expect(taken.body.error).toMatchObject({ code: 'skill_name_taken', field: 'name' });
    // Another seller's skill is invisible.
    expect(
      (await api(h.url, 'GET', '/api/v1/manage/skills/weather-now', { token: other.apiKey })).status,
    ).toBe(404);
  });

  it('replays an Idempotency-Key and refuses its reuse for another body', async () => {
    const body = validSkill();
    const headers = { 'idempotency-key': `k-${body.name}` };
    const first = await api(h.url, 'POST', '/api/v1/manage/skills', { token: seller.apiKey, body, headers });
    const second = await api(h.url, 'POST', '/api/v1/manage/skills', { token: seller.apiKey, body, headers });
    expect(first.status).toBe(201);
    expect(second.status).toBe(201);
    expect(second.body.skillId).toBe(first.body.skillId);
    const reused = await api(h.url, 'POST', '/api/v1/manage/skills', {
      token: seller.apiKey,
      body: { ...body, name: `${body.name}-x` },
      headers,
    });
    expect(reused.status).toBe(409);
    expect(reused.body.error.code).toBe('idempotency_key_reused');
  });

  it('runs concurrent requests with one Idempotency-Key once and answers them all alike', async () => {
    const body = validSkill();
    const headers = { 'idempotency-key': `race-${body.name}` };
    const answers = await Promise.all(
      Array.from({ length: 6 }, () =>
        api(h.url, 'POST', '/api/v1/manage/skills', { token: seller.apiKey, body, headers }),
      ),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(6).fill(201));
    expect(new Set(answers.map((a) => a.body.skillId)).size).toBe(1);
    const path = `/api/v1/manage/skills/${body.name}/endpoints`;
    const endpoint = { path: '/raced', method: 'GET', priceUsdc: '0.05', description: 'added once' };
    const added = await Promise.all(
      Array.from({ length: 6 }, () =>
        api(h.url, 'POST', path, {
          token: seller.apiKey,
          body: endpoint,
          headers: { 'idempotency-key': `ep-${body.name}` },
        }),
      ),
    );
    expect(added.map((a) => `${a.status} ${a.body?.error?.code ?? ''}`)).toEqual(
      Array(6).fill(`${added[0]!.status} `),
    );
    const skill = (await api(h.url, 'GET', `/api/v1/manage/skills/${body.name}`, { token: seller.apiKey }))
      .body;
    expect(skill.endpoints.filter((e: { path: string }) => e.path === '/raced')).toHaveLength(1);
  });
});

describe('a skill too large to publish', () => {
  it('refuses the change that would make skill.updated too large for NATS (413, nothing stored); later changes still publish', async () => {
    const body = validSkill();
    const created = await api(h.url, 'POST', '/api/v1/manage/skills', { token: seller.apiKey, body });
    expect(created.status).toBe(201);
    // 96 endpoints of 2,000 four-byte characters (about 8 KB each, 780 KB as an event, just under the limit)
    // written straight to the table: adding each through the API would publish 97 growing events.
    const description = '\u{1F4B0}'.repeat(2000);
    await h.registry.ctx.db
      .insertInto('endpoints')
      .values(
        Array.from({ length: 96 }, (_, i) => ({
          id: `ep_big_${body.name}_${i}`,
          skill_id: created.body.skillId,
          path: `/big-${i}`,
          method: 'GET' as const,
          description,
          price_micro: 10_000n,
        })),
      )
      .execute();
    const path = `/api/v1/manage/skills/${body.name}/endpoints`;
    const tooLarge = await api(h.url, 'POST', path, {
      token: seller.apiKey,
      body: { path: '/one-more', method: 'GET', priceUsdc: '0.01', description },
    });
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.body.error).toMatchObject({ code: 'skill_too_large', field: 'endpoints' });
    const stored = await api(h.url, 'GET', `/api/v1/manage/skills/${body.name}`, { token: seller.apiKey });
    expect(stored.body.endpoints.map((e: { path: string }) => e.path)).not.toContain('/one-more');
    // The registry's outbox holds nothing it cannot publish: a change that fits is published.
    const recorder = new EventRecorder(await h.env.bus(), 'skill.updated');
    try {
      const shortened = await api(h.url, 'PATCH', `${path}/ep_big_${body.name}_0`, {
        token: seller.apiKey,
        body: { description: 'short now' },
      });
      expect(shortened.status).toBe(200);
      await recorder.waitForEvent(
        (data) =>
          data.name === body.name &&
          (data.endpoints as Array<{ description: string }>).some((e) => e.description === 'short now'),
        { description: 'the shortened skill' },
      );
    } finally {
      recorder.stop();
    }
  });
});

describe('a seller holds a bounded number of skills', () => {
  it('refuses a skill past MAX_SKILLS_PER_SELLER with 409 naming the rule, also when they are created at once', async () => {
    // A replica of this test's registry with a small limit (the same schema, so it counts the same rows).
    const replica = await startRegistry(
      loadConfig(h.env.envFor('registry', { PUBLIC_BASE_URL, MAX_SKILLS_PER_SELLER: '3' })),
    );
    try {
      const owner = await signUpSeller(replica.url, Wallet.createRandom());
      const created = await Promise.all(
        Array.from({ length: 5 }, () =>
          api(replica.url, 'POST', '/api/v1/manage/skills', { token: owner.apiKey, body: validSkill() }),
        ),
      );
      expect(created.map((r) => r.status).sort()).toEqual([201, 201, 201, 409, 409]);
      expect(created.find((r) => r.status === 409)!.body.error).toMatchObject({
        code: 'skill_limit_reached',
        field: 'name',
        rule: 'at most 3 skills per seller',
      });
      // Archiving one frees nothing: an archived skill keeps its name.
      const first = created.find((r) => r.status === 201)!.body.name as string;
      const archived = await api(replica.url, 'POST', `/api/v1/manage/skills/${first}/archive`, {
        token: owner.apiKey,
      });
      expect(archived.status).toBe(200);
      const again = await api(replica.url, 'POST', '/api/v1/manage/skills', {
        token: owner.apiKey,
        body: validSkill(),
      });
      expect(again.status).toBe(409);
      // Another seller is not affected.
      const other = await signUpSeller(replica.url, Wallet.createRandom());
      const theirs = await api(replica.url, 'POST', '/api/v1/manage/skills', {
        token: other.apiKey,
        body: validSkill(),
      });
      expect(theirs.status).toBe(201);
    } finally {
      await replica.stop();
    }
  });
});

describe('Idempotency-Key claims in Postgres', () => {
  it('one duplicate takes over a claim its request abandoned; that request ending late changes nothing', async () => {
    const db = h.registry.ctx.db;
    const claims = registryClaims(db);
    const request = { scope: seller.sellerId, key: `abandoned-${Date.now()}`, fingerprint: 'f'.repeat(64) };
    // A claim made an hour ago (by Postgres's clock, to the microsecond) whose request never answered.
    await sql`insert into idempotency_keys (seller_id, key, request_hash, created_at)
      values (${request.scope}, ${request.key}, ${request.fingerprint}, now() - interval '1 hour')`.execute(
      db,
    );
    const abandonedAt = (await claims.find(request))!.createdAt!;
    let runs = 0;
    const work = async () => {
      runs += 1;
      return { status: 201, body: { run: runs } };
    };
    const answers = await Promise.all([1, 2, 3].map(() => idempotentWithClaim(claims, request, work)));
    expect(runs).toBe(1);
    expect(answers.map((a) => a.body)).toEqual([{ run: 1 }, { run: 1 }, { run: 1 }]);
    // The abandoned request comes back: its answer and its release touch nothing that is now the taker's.
    await claims.complete(request, abandonedAt, { status: 201, body: { run: 99 } });
    await claims.release(request, abandonedAt);
    expect((await claims.find(request))!.answer).toEqual({ status: 201, body: { run: 1 } });
  });
});

describe('endpoints and SKILL.md', () => {
  it('adds, updates and deactivates endpoints, regenerating SKILL.md with a new version each time', async () => {
    const name = 'md-skill';
    await createActiveSkill(h.url, seller.apiKey, {
      name,
      apiBaseUrl: sellerApi.url,
      endpoints: [{ path: '/one', method: 'GET', priceUsdc: '0.10', description: 'first' }],
    });
    const versions: string[] = [];
    const frontmatter = async () => {
      const md = await api(h.url, 'GET', `/api/v1/skills/${name}/SKILL.md`);
      expect(md.status).toBe(200);
      const front = parseYaml(/^---\n([\s\S]*?)\n---/.exec(md.text)![1]!);
      versions.push(front.version);
      return { front, text: md.text };
    };
    await frontmatter();

    const added = await api(h.url, 'POST', `/api/v1/manage/skills/${name}/endpoints`, {
      token: seller.sessionToken,
      body: { path: '/two', method: 'POST', priceUsdc: 2, description: 'second' },
    });
    expect(added.status).toBe(201);
    expect(added.body.status).toBe('ACTIVE');
    const two = added.body.endpoints.find((e: any) => e.path === '/two');
    expect(two).toMatchObject({
      priceUsdc: '2',
      url: `${PUBLIC_BASE_URL}/api/v1/skills/${name}/two`,
      active: true,
    });
    expect((await frontmatter()).front.endpoints.map((e: any) => e.price)).toEqual(['$0.1', '$2']);

    const dup = await api(h.url, 'POST', `/api/v1/manage/skills/${name}/endpoints`, {
      token: seller.apiKey,
      body: { path: '/two', method: 'POST', priceUsdc: 1 },
    });
    expect(dup.status).toBe(409);

    const updated = await api(h.url, 'PATCH', `/api/v1/manage/skills/${name}/endpoints/${two.endpointId}`, {
      token: seller.apiKey,
      body: { priceUsdc: '0.000001', description: 'cheaper' },
    });
    expect(updated.status).toBe(200);
    expect((await frontmatter()).front.endpoints[1]).toEqual({
      path: '/two',
      method: 'POST',
      price: '$0.000001',
      description: 'cheaper',
    });

    // A hand edit replaces SKILL.md; the next endpoint change regenerates it (the hand edit is replaced).
    const hand = `---\nname: ${name}\nbase_url: ${PUBLIC_BASE_URL}/api/v1/skills/${name}\nversion: "x"\ndescription: hand written\nendpoints:\n  - path: /one\n    method: GET\n    price: $0.1\n    description: first\n---\n\n# Hand written\n`;
    const put = await api(h.url, 'PUT', `/api/v1/manage/skills/${name}/skill-md`, {
      token: seller.apiKey,
      body: { content: hand },
    });
    expect(put.status).toBe(200);
    expect(put.body.skillMdSource).toBe('manual');
    const handMd = await frontmatter();
    expect(handMd.text).toContain('# Hand written');
    expect(handMd.front.description).toBe('hand written');
    const badHand = await api(h.url, 'PUT', `/api/v1/manage/skills/${name}/skill-md`, {
      token: seller.apiKey,
      body: { content: '---\nname: other\n---\n' },
    });
    expect(badHand.status).toBe(400);
    // A frontmatter whose aliases expand without bound is refused by the rule, not answered with a 500.
    const aliases = Array.from({ length: 101 }, () => '  - *x').join('\n');
    const aliasBomb = await api(h.url, 'PUT', `/api/v1/manage/skills/${name}/skill-md`, {
      token: seller.apiKey,
      body: { content: `---\na: &x v\nb:\n${aliases}\n---\n` },
    });
    expect(aliasBomb.status).toBe(400);
    expect(aliasBomb.body.error).toMatchObject({ field: 'content', rule: expect.stringMatching(/aliases/) });

    const deactivated = await api(
      h.url,
      'POST',
      `/api/v1/manage/skills/${name}/endpoints/${two.endpointId}/deactivate`,
      { token: seller.apiKey },
    );
    expect(deactivated.status).toBe(200);
    expect(deactivated.body.skillMdSource).toBe('generated');
    expect(deactivated.body.endpoints.find((e: any) => e.endpointId === two.endpointId).active).toBe(false);
    const after = await frontmatter();
    expect(after.text).not.toContain('# Hand written');
    expect(after.front.endpoints.map((e: any) => e.path)).toEqual(['/one']);
    expect(new Set(versions).size).toBe(versions.length);

    const catalog = await api(h.url, 'GET', `/api/v1/skills?q=${name}`);
    expect(catalog.body.data[0].endpoints.map((e: any) => [e.path, e.price])).toEqual([['/one', '$0.1']]);
  });
});
