import { requestRpc } from '@paygate/bus';
import { testWallets } from '@paygate/testing';
import { type Harness, skillSnapshot, startHarness, startUpstream } from './harness';

jest.setTimeout(90_000);

/**
 * The paid call is one pipeline (routes/paid-call/): a subscriber's repeated call and every refusal go through
 * the same steps, a cache only making a step cheaper. Each case's status, reason and the headers a buyer reads.
 */
interface Answer {
  status: number;
  headers: Headers;
  body: string;
}

describe('gateway-proxy: the paid call pipeline', () => {
  let h: Harness;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;

  beforeAll(async () => {
    h = await startHarness('gwparity', { RATE_LIMIT_PER_MINUTE: '1000', RETRY_WINDOW_SECONDS: '600' });
    upstream = await startUpstream();
    const endpoints = skillSnapshot({ name: 'x', apiBaseUrl: '' }).endpoints;
    const flaky = {
      endpointId: 'ep-news-flaky',
      path: '/flaky',
      method: 'GET' as const,
      description: 'Flaky',
      price: '0.05',
      isHealthy: true,
      active: true,
    };
    await h.publishSkill(
      skillSnapshot({
        name: 'news',
        apiBaseUrl: `${upstream.url}/seller`,
        type: 'Subscription',
        durationDays: 30,
        endpoints: [...endpoints, flaky],
      }),
    );
    await h.publishSkill(skillSnapshot({ name: 'weather', apiBaseUrl: `${upstream.url}/seller` }));
  });
  afterAll(async () => {
    await upstream?.close();
    await h?.stop();
  });

  async function call(path: string, init: RequestInit = {}): Promise<Answer> {
    const res = await fetch(`${h.gateway.url}/api/v1/skills${path}`, init);
    return { status: res.status, headers: res.headers, body: await res.text() };
  }

  it('answers each case by its step: served, refused with its reason, 404, 405, HEAD', async () => {
    const resource = h.resource('GET', 'news', '/data');
    const txHash = await h.transfer('buyer', 50_000n);
    const paid = await h.header({ txHash, resource });
    // The first presentation claims the transfer (and caches the subscription claim).
    const first = await fetch(`${h.gateway.url}/api/v1/skills/news/data`, {
      headers: { 'X-402-Payment': paid },
    });
    expect(first.status).toBe(200);
    await first.arrayBuffer();

    const cases: Array<{
      name: string;
      path: string;
      init?: RequestInit;
      status: number;
      reason?: string;
    }> = [
      { name: 'a subscriber repeats a call', path: '/news/data', status: 200 },
      { name: 'with a query', path: '/news/data?city=Oslo&n=2', status: 200 },
      {
        name: 'another endpoint costing more',
        path: '/news/echo',
        init: { method: 'POST', body: 'x' },
        status: 402,
        reason: 'insufficient_amount',
      },
      {
        name: 'another skill',
        path: '/weather/data',
        status: 402,
        reason: 'payment_already_used',
      },
      { name: 'no payment', path: '/news/data', status: 402 },
      { name: 'unknown skill', path: '/nope/data', status: 404 },
      { name: 'unknown path', path: '/news/nothing', status: 404 },
      { name: 'wrong method', path: '/news/data', init: { method: 'DELETE' }, status: 405 },
      { name: 'a price ping', path: '/news/data', init: { method: 'HEAD' }, status: 200 },
    ];
    const withHeader = (path: string, header: string, init: RequestInit = {}) => ({
      path,
      init: { ...init, headers: { 'X-402-Payment': header } },
    });
    const bodies402: Array<Record<string, unknown>> = [];
    for (const c of cases) {
      const request =
        c.name === 'no payment' ? { path: c.path, init: c.init ?? {} } : withHeader(c.path, paid, c.init);
      const answer = await call(request.path, request.init);
      expect({ case: c.name, status: answer.status }).toEqual({ case: c.name, status: c.status });
      if (c.reason) expect(JSON.parse(answer.body)).toMatchObject({ reason: c.reason });
      if (answer.status === 402) bodies402.push(JSON.parse(answer.body));
      expect(answer.headers.get('access-control-allow-origin')).toBe('*');
      if (c.status === 200 && c.init?.method !== 'HEAD')
        expect(answer.headers.get('x-402-receipt')).toBe(txHash);
      if (c.status === 405) expect(answer.headers.get('allow')).toBe('GET');
    }

    // The 402s (a challenge, refusals) carry only fields the OpenAPI document declares for them, and all it requires.
    const openapi = await (await fetch(`${h.gateway.url}/api/v1/openapi/gateway.json`)).json();
    const declared = openapi.paths['/api/v1/skills/{skillName}/{path}'].get.responses['402'].content[
      'application/json'
    ].schema as JsonSchema;
    expect(bodies402.length).toBe(3);
    for (const body of bodies402) expect(undeclaredFields(declared, body)).toEqual([]);

    // Someone else's signature, a stranger presenting the payer's transfer, a wrong network, a bad header.
    const refusals: Array<{ name: string; header: string; status: number; reason?: string }> = [
      {
        name: 'signed by someone else',
        header: await h.header({ txHash, resource, signer: 'stranger' }),
        status: 402,
        reason: 'invalid_signature',
      },
      {
        name: 'a stranger presents the transfer',
        header: await h.header({ txHash, resource, from: 'stranger' }),
        status: 402,
        reason: 'payment_already_used',
      },
      {
        name: 'another network',
        header: await h.header({ txHash, resource, network: 'base' }),
        status: 402,
        reason: 'wrong_network',
      },
      { name: 'a malformed header', header: '%%%', status: 400 },
    ];
    for (const c of refusals) {
      const answer = await call('/news/data', { headers: { 'X-402-Payment': c.header } });
      expect({ case: c.name, status: answer.status }).toEqual({ case: c.name, status: c.status });
      if (c.reason) expect(JSON.parse(answer.body)).toMatchObject({ reason: c.reason });
    }

    // The seller fails: the subscriber gets the seller's 5xx with the receipt.
    const flakyTx = await h.transfer('buyer', 50_000n);
    const flakyPaid = await h.header({ txHash: flakyTx, resource: h.resource('GET', 'news', '/flaky') });
    const claimed = await fetch(`${h.gateway.url}/api/v1/skills/news/flaky`, {
      headers: { 'X-402-Payment': flakyPaid },
    });
    expect(claimed.status).toBe(200);
    await claimed.arrayBuffer();
    upstream.failuresLeft.count = 1;
    const failed = await call('/news/flaky', { headers: { 'X-402-Payment': flakyPaid } });
    expect(failed.status).toBe(503);
    expect(failed.headers.get('x-402-receipt')).toBe(flakyTx);

    // Expired: refused, although the claim is still in memory.
    h.clock.advance(31 * 24 * 60 * 60 * 1000);
    try {
      const expired = await call('/news/data', { headers: { 'X-402-Payment': paid } });
      expect(expired.status).toBe(402);
      expect(JSON.parse(expired.body)).toMatchObject({ reason: 'subscription_expired' });
    } finally {
      h.clock.advance(-31 * 24 * 60 * 60 * 1000);
    }
  });

  it('a transfer the ledger gives to another payment path: 402 payment_already_used, and no claim row, nothing booked for it', async () => {
    const txHash = await h.transfer('buyer', 50_000n);
    // Checkout spent the transfer first (the ledger's claim; its logIndex is the transfer's only log).
    const held = await requestRpc(
      h.bus,
      'ledger.claim_transfer',
      {
        chainId: 31337,
        txHash,
        logIndex: 0,
        claimedVia: 'checkout',
        reference: 'ses_paid_elsewhere',
        payer: testWallets.buyer.address,
        amount: '0.05',
      },
      { timeoutMs: 10_000 },
    );
    expect(held).toMatchObject({ ok: true, fresh: true });
    const resource = h.resource('GET', 'news', '/data');
    const answer = await call('/news/data', {
      headers: { 'X-402-Payment': await h.header({ txHash, resource }) },
    });
    expect(answer.status).toBe(402);
    expect(JSON.parse(answer.body)).toMatchObject({ reason: 'payment_already_used', claimedBy: 'checkout' });
    // The row written while the ledger answered was rolled back with its event.
    expect(
      await h.db.selectFrom('payment_claims').where('tx_hash', '=', txHash).selectAll().execute(),
    ).toEqual([]);
    // Nothing booked for this gateway's payment: the ledger gave the transfer to the checkout session.
    expect(h.ledgerPayments(txHash).filter((p) => p.source === 'x402')).toEqual([]);
  });
});

interface JsonSchema {
  properties?: Record<string, JsonSchema>;
  required?: string[];
  allOf?: JsonSchema[];
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
}

/** The fields of `body` (and of its nested objects) no alternative of `schema` declares, or that one requires and lacks. */
function undeclaredFields(schema: JsonSchema, body: Record<string, unknown>, at = ''): string[] {
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (alternatives) {
    const each = alternatives.map((alternative) => undeclaredFields(alternative, body, at));
    return each.find((problems) => problems.length === 0) ?? each.flat();
  }
  const parts = [schema, ...(schema.allOf ?? [])];
  const properties = Object.assign({}, ...parts.map((part) => part.properties ?? {})) as Record<
    string,
    JsonSchema
  >;
  const required = parts.flatMap((part) => part.required ?? []);
  const problems = required.filter((name) => !(name in body)).map((name) => `${at}${name} missing`);
  for (const [name, value] of Object.entries(body)) {
    const field = properties[name];
    if (!field) problems.push(`${at}${name} undeclared`);
    else if (value && typeof value === 'object' && !Array.isArray(value) && field.properties)
      problems.push(...undeclaredFields(field, value as Record<string, unknown>, `${at}${name}.`));
  }
  return problems;
}
