import { type HostResolver, resolveAllAddresses } from '@paygate/net';
import { EventRecorder, signUpSeller, waitFor } from '@paygate/testing';
import { Wallet } from 'ethers';
import { api, type Harness, startHarness, startSellerApi } from './helpers';

let h: Harness;
let sellerApi: Awaited<ReturnType<typeof startSellerApi>>;
let seller: Awaited<ReturnType<typeof signUpSeller>>;
const OPERATOR = { authorization: 'Bearer operator-token-for-tests-000000' };

/**
 * DNS for names under rebind.test, standing in for a seller's DNS server: the first answer for a name is a public
 * address (what the registration check sees), every later one is 127.0.0.1 (what a rebinding attacker serves
 * when Paygate connects). Other names go to the system resolver.
 */
function rebindingDns(): HostResolver {
  const asked = new Map<string, number>();
  return async (host) => {
    if (!host.endsWith('.rebind.test')) return resolveAllAddresses(host);
    const count = asked.get(host) ?? 0;
    asked.set(host, count + 1);
    return count === 0 ? ['93.184.216.34'] : ['127.0.0.1'];
  };
}

/** DNS where every name under rebind.test is this machine. */
const loopbackDns: HostResolver = async (host) =>
  host.endsWith('.rebind.test') ? ['127.0.0.1'] : resolveAllAddresses(host);

beforeAll(async () => {
  h = await startHarness(
    'reglife',
    {
      HEALTH_INTERVAL_MS: '300',
      // Generous: on a busy machine a loopback ping can take most of a second; the slow endpoint takes longer.
      VALIDATION_TIMEOUT_MS: '3000',
      OPERATOR_TOKEN: 'operator-token-for-tests-000000',
    },
    { resolveHost: loopbackDns },
  );
  sellerApi = await startSellerApi();
  seller = await signUpSeller(h.url, Wallet.createRandom());
});
afterAll(async () => {
  await sellerApi?.close();
  await h?.stop();
});

async function skill(name: string) {
  return (await api(h.url, 'GET', `/api/v1/manage/skills/${name}`, { token: seller.apiKey })).body;
}
async function settled(name: string, timeoutMs = 10_000) {
  return waitFor(
    async () => {
      const s = await skill(name);
      return s.status !== 'PENDING_VALIDATION' ? s : undefined;
    },
    { timeoutMs, message: `${name} still pending` },
  );
}
async function create(name: string, endpoints: unknown[], extra: Record<string, unknown> = {}) {
  const response = await api(h.url, 'POST', '/api/v1/manage/skills', {
    token: seller.apiKey,
    body: {
      name,
      displayName: name,
      description: 'A skill for lifecycle tests.',
      apiBaseUrl: sellerApi.url,
      type: 'API',
      endpoints,
      ...extra,
    },
  });
  expect(response.status).toBe(201);
  expect(response.body.status).toBe('PENDING_VALIDATION');
  return response.body;
}
const visible = async (name: string) => {
  const catalog = await api(h.url, 'GET', `/api/v1/skills?q=${name}`);
  const md = await api(h.url, 'GET', `/api/v1/skills/${name}/SKILL.md`);
  return { inCatalog: catalog.body.data.some((s: any) => s.name === name), skillMd: md.status };
};

describe('skill lifecycle', () => {
  it('fails validation naming the endpoint and the cause, and a retry validates again', async () => {
    sellerApi.status = 503;
    await create('flaky-api', [
      { path: '/ok', method: 'GET', priceUsdc: '0.01' },
      { path: '/broken', method: 'POST', priceUsdc: '0.02' },
    ]);
    const failed = await settled('flaky-api');
    expect(failed.status).toBe('VALIDATION_FAILED');
    expect(failed.statusReason).toMatch(/GET \/ok/);
    expect(failed.statusReason).toMatch(/HTTP 503/);
    expect(await visible('flaky-api')).toEqual({ inCatalog: false, skillMd: 404 });

    sellerApi.status = 200;
    const retry = await api(h.url, 'POST', '/api/v1/manage/skills/flaky-api/validate', {
      token: seller.apiKey,
    });
    expect(retry.status).toBe(202);
    expect(retry.body.status).toBe('PENDING_VALIDATION');
    const active = await settled('flaky-api');
    expect(active.status).toBe('ACTIVE');
    expect(active.statusReason).toBeNull();
    expect(await visible('flaky-api')).toEqual({ inCatalog: true, skillMd: 200 });
    const again = await api(h.url, 'POST', '/api/v1/manage/skills/flaky-api/validate', {
      token: seller.apiKey,
    });
    expect(again.status).toBe(409);
  });

  it('stops probing a skill at its first failing endpoint (at most one round of 4 probes)', async () => {
    try {
      sellerApi.status = 503;
      const paths = Array.from({ length: 12 }, (_, i) => `/many-${i}`);
      await create(
        'many-failing',
        paths.map((path) => ({ path, method: 'GET', priceUsdc: '0.01' })),
      );
      expect((await settled('many-failing')).status).toBe('VALIDATION_FAILED');
      const probed = sellerApi.hits.filter((hit) => paths.some((path) => hit === `HEAD ${path}`));
      expect(probed.length).toBeGreaterThanOrEqual(1);
      expect(probed.length).toBeLessThanOrEqual(4);
    } finally {
      sellerApi.status = 200;
    }
  });

  it('fails an endpoint whose HEAD answers 404 or 405, naming the endpoint, the status and the rule', async () => {
    try {
      sellerApi.status = 404;
      await create('missing-api', [{ path: '/gone', method: 'GET', priceUsdc: '0.01' }]);
      const missing = await settled('missing-api');
      expect(missing.status).toBe('VALIDATION_FAILED');
      expect(missing.statusReason).toBe(
        `endpoint GET /gone: HEAD ${sellerApi.url}/gone answered HTTP 404: nothing is served at this URL (passing: 2xx, 400, 401, 402, 403 or 422)`,
      );
      const retry = async () => {
        const response = await api(h.url, 'POST', '/api/v1/manage/skills/missing-api/validate', {
          token: seller.apiKey,
        });
        expect(response.status).toBe(202);
        return settled('missing-api');
      };
      sellerApi.status = 405;
      expect((await retry()).statusReason).toMatch(
        /^endpoint GET \/gone: HEAD .*\/gone answered HTTP 405: the endpoint does not answer HEAD/,
      );
      sellerApi.status = 302;
      expect((await retry()).statusReason).toMatch(/answered HTTP 302: a redirect \(not followed/);
      // Present behind the seller's own credentials: it responds.
      sellerApi.status = 401;
      expect(await retry()).toMatchObject({ status: 'ACTIVE', statusReason: null });
    } finally {
      sellerApi.status = 200;
    }
  });

  it('in development, connects to a seller host whatever it resolves to (loopback here)', async () => {
    const port = new URL(sellerApi.url).port;
    const hits = sellerApi.hits.length;
    await create('rebind-dev', [{ path: '/dev', method: 'GET', priceUsdc: '0.01' }], {
      apiBaseUrl: `http://api-dev.rebind.test:${port}`,
    });
    expect((await settled('rebind-dev')).status).toBe('ACTIVE');
    // The HEAD went through the injected DNS answer (127.0.0.1) to the local seller API.
    expect(sellerApi.hits.slice(hits)).toContain('HEAD /dev');
  });

  it('fails a slow endpoint (latency limit) and a skill without endpoints', async () => {
    sellerApi.delayMs = 4500;
    try {
      await create('slow-api', [{ path: '/slow', method: 'GET', priceUsdc: '1' }]);
      // The delay slows every health ping of the skills already active too, and pings share the checker's loop.
      const failed = await settled('slow-api', 30_000);
      expect(failed.status).toBe('VALIDATION_FAILED');
      expect(failed.statusReason).toMatch(/GET \/slow.*no answer within 3000 ms/);
    } finally {
      sellerApi.delayMs = 0;
    }
    await create('empty-api', []);
    const empty = await settled('empty-api');
    expect(empty.status).toBe('VALIDATION_FAILED');
    expect(empty.statusReason).toMatch(/no endpoints/);
    // Adding an endpoint to a failed skill sends it back to validation.
    const added = await api(h.url, 'POST', '/api/v1/manage/skills/empty-api/endpoints', {
      token: seller.apiKey,
      body: { path: '/now', method: 'GET', priceUsdc: '0.5' },
    });
    expect(added.body.status).toBe('PENDING_VALIDATION');
    expect((await settled('empty-api')).status).toBe('ACTIVE');
  });

  it('suspension is an operator action; archiving is the developer’s; only ACTIVE skills are offered', async () => {
    await create('policy-api', [{ path: '/x', method: 'GET', priceUsdc: '1' }]);
    expect((await settled('policy-api')).status).toBe('ACTIVE');
    const recorder = new EventRecorder(await h.env.bus(), 'skill.updated');

    expect(
      (await api(h.url, 'POST', '/api/v1/operator/skills/policy-api/suspend', { token: seller.apiKey }))
        .status,
    ).toBe(401);
    const suspended = await api(h.url, 'POST', '/api/v1/operator/skills/policy-api/suspend', {
      headers: OPERATOR,
      body: { reason: 'spam' },
    });
    expect(suspended.status).toBe(200);
    expect(suspended.body).toMatchObject({ status: 'SUSPENDED', statusReason: 'spam' });
    expect(await visible('policy-api')).toEqual({ inCatalog: false, skillMd: 404 });
    expect(
      (await api(h.url, 'POST', '/api/v1/manage/skills/policy-api/archive', { token: seller.apiKey })).status,
    ).toBe(409);

    const lifted = await api(h.url, 'POST', '/api/v1/operator/skills/policy-api/unsuspend', {
      headers: OPERATOR,
    });
    expect(lifted.body.status).toBe('PENDING_VALIDATION');
    expect((await settled('policy-api')).status).toBe('ACTIVE');

    const archived = await api(h.url, 'POST', '/api/v1/manage/skills/policy-api/archive', {
      token: seller.apiKey,
    });
    expect(archived.body.status).toBe('ARCHIVED');
    expect(await visible('policy-api')).toEqual({ inCatalog: false, skillMd: 404 });
    const edit = await api(h.url, 'PATCH', '/api/v1/manage/skills/policy-api', {
      token: seller.apiKey,
      body: { displayName: 'x' },
    });
    expect(edit.status).toBe(409);

    // Each status change published one skill.updated, in revision order; the activation before the recorder
    // started may arrive late, so count from the suspension on.
    const suspension = await recorder.waitForEvent(
      (data) => data.name === 'policy-api' && data.status === 'SUSPENDED',
    );
    const since = (suspension.data as { revision: number }).revision;
    await recorder.waitForEvent((data) => data.name === 'policy-api' && data.status === 'ARCHIVED');
    const statuses = recorder.events
      .map((e) => e.data as { name: string; status: string; revision: number })
      .filter((data) => data.name === 'policy-api' && data.revision >= since)
      .sort((a, b) => a.revision - b.revision)
      .map((data) => data.status)
      .filter((status, i, all) => i === 0 || all[i - 1] !== status); // a health ping may republish a status
    expect(statuses).toEqual(['SUSPENDED', 'PENDING_VALIDATION', 'ACTIVE', 'ARCHIVED']);
    recorder.stop();
  });

  it('health pings flag an unhealthy endpoint (still listed) and publish skill.updated', async () => {
    await create('pinged-api', [{ path: '/p', method: 'GET', priceUsdc: '1' }]);
    expect((await settled('pinged-api')).status).toBe('ACTIVE');
    const recorder = new EventRecorder(await h.env.bus(), 'skill.updated');
    sellerApi.status = 500;
    try {
      await waitFor(async () => (await skill('pinged-api')).endpoints[0].isHealthy === false, {
        timeoutMs: 8000,
        message: 'not flagged',
      });
      const catalog = await api(h.url, 'GET', '/api/v1/skills?q=pinged-api');
      expect(catalog.body.data[0].endpoints[0].isHealthy).toBe(false);
      await recorder.waitForEvent(
        (data: any) => data.name === 'pinged-api' && data.endpoints[0].isHealthy === false,
      );
    } finally {
      sellerApi.status = 200;
    }
    await waitFor(async () => (await skill('pinged-api')).endpoints[0].isHealthy === true, {
      timeoutMs: 8000,
      message: 'not healthy again',
    });
    recorder.stop();
  });

  it('filters the catalog by category and text and paginates it', async () => {
    for (const [name, categories] of [
      ['cat-alpha', ['maps']],
      ['cat-beta', ['maps', 'geo']],
      ['cat-gamma', ['finance']],
    ] as const) {
      await create(name, [{ path: '/q', method: 'GET', priceUsdc: '0.1' }], {
        categories,
        description: `Catalog test skill ${name}`,
      });
    }
    await waitFor(
      async () => (await api(h.url, 'GET', '/api/v1/skills?q=Catalog%20test')).body.data.length === 3,
      { timeoutMs: 10_000 },
    );
    const maps = await api(h.url, 'GET', '/api/v1/skills?category=maps');
    expect(maps.body.data.map((s: any) => s.name)).toEqual(['cat-alpha', 'cat-beta']);
    const page1 = await api(h.url, 'GET', '/api/v1/skills?q=catalog%20TEST&limit=2');
    expect(page1.body.data.map((s: any) => s.name)).toEqual(['cat-alpha', 'cat-beta']);
    const page2 = await api(
      h.url,
      'GET',
      `/api/v1/skills?q=catalog%20test&limit=2&cursor=${page1.body.nextCursor}`,
    );
    expect(page2.body.data.map((s: any) => s.name)).toEqual(['cat-gamma']);
    expect(page2.body.nextCursor).toBeNull();
    expect((await api(h.url, 'GET', '/api/v1/skills?limit=0')).body.error.field).toBe('limit');
    expect((await api(h.url, 'GET', '/api/v1/skills?q=%25')).status).toBe(200);
  });
});

describe('production rules', () => {
  let prod: Harness;
  beforeAll(async () => {
    prod = await startHarness(
      'regprod',
      {
        NODE_ENV: 'production',
        SESSION_SECRET: 'a-production-session-secret-of-32-chars!',
        OPERATOR_TOKEN: 'a-production-operator-token-0000',
        SECRETS_ENCRYPTION_KEY: 'a-production-encryption-key-of-32-chars',
      },
      { resolveHost: rebindingDns() },
    );
  });
  afterAll(async () => {
    await prod?.stop();
  });

  it('requires https and refuses loopback, private, link-local and CGNAT targets', async () => {
    const owner = await signUpSeller(prod.url, Wallet.createRandom());
    expect(owner.apiKey).toMatch(/^sk_live_/);
    const cases: Array<[string, RegExp]> = [
      ['http://api.example.com', /https/],
      ['https://localhost', /loopback/],
      ['https://127.0.0.1:8443', /loopback, private or link-local/],
      ['https://10.1.2.3', /private/],
      ['https://192.168.1.1', /private/],
      ['https://169.254.169.254', /link-local/],
      ['https://100.64.0.1', /private/],
      ['https://[::1]', /loopback|private/],
      ['https://[fd00::1]', /private/],
      ['https://[::ffff:127.0.0.1]', /private/],
    ];
    for (const [apiBaseUrl, rule] of cases) {
      const response = await api(prod.url, 'POST', '/api/v1/manage/skills', {
        token: owner.apiKey,
        body: {
          name: 'prod-skill',
          displayName: 'P',
          description: 'Production rules test.',
          apiBaseUrl,
          type: 'API',
        },
      });
      expect({ apiBaseUrl, status: response.status, field: response.body.error?.field }).toEqual({
        apiBaseUrl,
        status: 400,
        field: 'apiBaseUrl',
      });
      expect(response.body.error.rule).toMatch(rule);
    }
  });

  it('refuses at connect time a host that resolved to a public address at registration and to loopback now', async () => {
    const owner = await signUpSeller(prod.url, Wallet.createRandom());
    const port = new URL(sellerApi.url).port;
    const created = await api(prod.url, 'POST', '/api/v1/manage/skills', {
      token: owner.apiKey,
      body: {
        name: 'rebind-prod',
        displayName: 'R',
        description: 'DNS rebinding test.',
        apiBaseUrl: `https://api-prod.rebind.test:${port}`,
        type: 'API',
        endpoints: [{ path: '/rebound', method: 'GET', priceUsdc: '0.01' }],
      },
    });
    expect(created.status).toBe(201);
    const failed = await waitFor(
      async () => {
        const s = (await api(prod.url, 'GET', '/api/v1/manage/skills/rebind-prod', { token: owner.apiKey }))
          .body;
        return s.status !== 'PENDING_VALIDATION' ? s : undefined;
      },
      { timeoutMs: 10_000, message: 'rebind-prod still pending' },
    );
    expect(failed.status).toBe('VALIDATION_FAILED');
    expect(failed.statusReason).toBe(
      `endpoint GET /rebound: HEAD https://api-prod.rebind.test:${port}/rebound refused to connect to api-prod.rebind.test: it resolves to 127.0.0.1, a loopback, private, link-local or reserved address (production rule, checked at connect time)`,
    );
    // Nothing reached the loopback server.
    expect(sellerApi.hits.filter((hit) => hit.includes('/rebound'))).toEqual([]);
  });
});
