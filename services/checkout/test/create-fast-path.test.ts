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
    expect(created.body.exactAmount).toMatch(/^4\.00\d{4}$/);

    const broken = await post().set('content-type', 'application/json').send('{"skill":');
    expect(broken.status).toBe(400);
    expect(broken.body.error).toMatchObject({ code: 'invalid_json', field: 'body', rule: 'must be JSON' });
    expect(broken.body.error.requestId).toBe(broken.headers['x-request-id']);

    const scalar = await post().set('content-type', 'application/json').send('"fast"');
    expect(scalar.body.error?.code).toBe('invalid_json');

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
});
