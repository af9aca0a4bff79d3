import http from 'node:http';
import request from 'supertest';
import { type CheckoutHarness, publishSkill, skillEvent, startHarness } from './helpers';

/** Widget requests are answered ahead of express (src/sessions/fast-path.ts): they must answer alike. */
describe('session creation fast path', () => {
  let h: CheckoutHarness;
  beforeAll(async () => {
    h = await startHarness('cofast');
    await publishSkill(h, skillEvent(h, { name: 'fast' }, ['4']));
  });
  afterAll(() => h.stop());

  const post = () =>
    request(h.url).post('/api/v1/checkout/sessions').set('Authorization', `Bearer ${h.publishableKey}`);

  it('answers with the request id, CORS headers and the shared error body, and records the request metric', async () => {
    const created = await post().set('x-request-id', 'req-fast-1').send({ skill: 'fast' });
    expect(created.status).toBe(201);
    expect(created.headers['x-request-id']).toBe('req-fast-1');
    expect(created.headers['access-control-allow-origin']).toBe('*');
    expect(created.headers['content-type']).toBe('application/json; charset=utf-8');
    // The price plus a unique suffix, on the checkout wallet.
    expect(created.body.exactAmount).toMatch(/^4\.00\d{4}$/);
    expect(created.body.matching).toBe('amount');

    const broken = await post().set('content-type', 'application/json').send('{"skill":');
    expect(broken.status).toBe(400);
    expect(broken.body.error).toMatchObject({
      code: 'invalid_json',
      field: 'body',
      rule: 'must be a JSON object or array',
    });
    expect(broken.body.error.requestId).toBe(broken.headers['x-request-id']);

    const scalar = await post().set('content-type', 'application/json').send('"fast"');
    expect(scalar.body.error).toMatchObject({
      code: 'invalid_json',
      message: 'body must be a JSON object or array',
    });

    const extra = await post().send({ skill: 'fast', amount: '1' });
    expect(extra.status).toBe(400);
    expect(extra.body.error).toMatchObject({ code: 'invalid_request', field: 'amount' });

    const metrics = await request(h.url).get('/metrics');
    expect(metrics.text).toMatch(
      /http_request_duration_seconds_count\{[^}]*method="POST",route="\/api\/v1\/checkout\/sessions",status="201"\} 1\n/,
    );
    expect(metrics.text).toMatch(/route="\/api\/v1\/checkout\/sessions",status="400"\} 3\n/);
  });

  it('replays an Idempotency-Key like the express route', async () => {
    const first = await post().set('Idempotency-Key', 'fast-k1').send({ skill: 'fast' });
    const again = await post().set('Idempotency-Key', 'fast-k1').send({ skill: 'fast' });
    expect(first.status).toBe(201);
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(first.body);
  });

  /**
   * Both transports of session creation, each case through each: the fast path (a JSON body with its length)
   * and express (the same bytes sent chunked, which the fast path leaves to express). Status, body and the
   * headers a caller reads must match; only the new session's id and exact amount differ.
   */
  it('answers every case alike through the fast path and the express route', async () => {
    interface Answer {
      status: number;
      headers: Record<string, string | undefined>;
      body: unknown;
      viaExpress: boolean;
    }
    const send = (
      body: string,
      headers: Record<string, string>,
      transport: 'fast' | 'express',
    ): Promise<Answer> =>
      new Promise((resolve, reject) => {
        const req = http.request(`${h.url}/api/v1/checkout/sessions`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            ...headers,
            ...(transport === 'fast' ? { 'content-length': String(Buffer.byteLength(body)) } : {}),
          },
        });
        req.on('error', reject);
        req.on('response', (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const picked: Record<string, string | undefined> = {};
            for (const name of [
              'content-type',
              'x-request-id',
              'idempotent-replayed',
              'access-control-allow-origin',
              'access-control-expose-headers',
            ])
              picked[name] = res.headers[name] as string | undefined;
            resolve({
              status: res.statusCode ?? 0,
              headers: picked,
              body: JSON.parse(Buffer.concat(chunks).toString('utf8')),
              // express's res.json sets an ETag; the fast path does not: which transport answered.
              viaExpress: res.headers.etag !== undefined,
            });
          });
        });
        if (transport === 'express') req.write(body); // no content-length: sent chunked
        req.end(transport === 'fast' ? body : undefined);
      });
    const normalized = (answer: Answer) => {
      const body = answer.body as Record<string, unknown>;
      const generatedId = (id: unknown) =>
        typeof id === 'string' && /^[0-9a-f-]{36}$/.test(id) ? '<generated>' : id;
      const error = body.error as Record<string, unknown> | undefined;
      return {
        status: answer.status,
        headers: { ...answer.headers, 'x-request-id': generatedId(answer.headers['x-request-id']) },
        body: error
          ? { error: { ...error, requestId: generatedId(error.requestId) } }
          : { ...body, sessionId: '<new>', exactAmount: '<unique>' },
      };
    };
    const auth = { authorization: `Bearer ${h.publishableKey}` };
    const cases: Array<{ name: string; body: string; headers?: Record<string, string>; status: number }> = [
      { name: 'created', body: '{"skill":"fast"}', status: 201 },
      { name: 'with an endpoint id', body: '{"skill":"fast","endpointId":"nope"}', status: 404 },
      { name: 'unknown skill', body: '{"skill":"slow"}', status: 404 },
      { name: 'a field of the secret-key body', body: '{"skill":"fast","amount":"1"}', status: 400 },
      { name: 'not JSON', body: '{"skill":', status: 400 },
      { name: 'a JSON scalar', body: '"fast"', status: 400 },
      { name: 'a JSON array', body: '[]', status: 400 },
      { name: 'an empty body', body: '', status: 400 },
      {
        name: 'a malformed key',
        body: '{"skill":"fast"}',
        headers: { authorization: 'Bearer pk_!' },
        status: 401,
      },
      {
        name: 'an unknown key',
        body: '{"skill":"fast"}',
        headers: { authorization: `Bearer pk_test_${'0'.repeat(24)}` },
        status: 401,
      },
      {
        name: 'a bad Idempotency-Key',
        body: '{"skill":"fast"}',
        headers: { 'idempotency-key': 'x'.repeat(256) },
        status: 400,
      },
      {
        name: 'an unusable request id',
        body: '{"skill":"fast"}',
        headers: { 'x-request-id': 'not ok!' },
        status: 201,
      },
    ];
    for (const c of cases) {
      const headers = { ...auth, 'x-request-id': `parity-${cases.indexOf(c)}`, ...c.headers };
      const fast = await send(c.body, headers, 'fast');
      const viaExpress = await send(c.body, headers, 'express');
      expect({ case: c.name, fast: fast.viaExpress, express: viaExpress.viaExpress }).toEqual({
        case: c.name,
        fast: false,
        express: true,
      });
      expect({ case: c.name, ...normalized(fast) }).toEqual({ case: c.name, ...normalized(viaExpress) });
      expect({ case: c.name, status: fast.status }).toEqual({ case: c.name, status: c.status });
    }

    // An Idempotency-Key created on one transport replays on the other, with the first answer's body.
    for (const [first, second] of [
      ['fast', 'express'],
      ['express', 'fast'],
    ] as const) {
      const headers = { ...auth, 'idempotency-key': `parity-${first}`, 'x-request-id': `parity-${first}` };
      const created = await send('{"skill":"fast"}', headers, first);
      const replayed = await send('{"skill":"fast"}', headers, second);
      expect(created.status).toBe(201);
      expect({
        status: replayed.status,
        body: replayed.body,
        replayedHeader: replayed.headers['idempotent-replayed'],
      }).toEqual({
        status: 200,
        body: created.body,
        replayedHeader: 'true',
      });
      const conflicting = await send('{"skill":"fast","endpointId":"x"}', headers, first);
      const conflictingOther = await send('{"skill":"fast","endpointId":"x"}', headers, second);
      expect(normalized(conflicting)).toEqual(normalized(conflictingOther));
    }
  });
});
