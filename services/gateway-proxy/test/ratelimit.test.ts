import { waitFor } from '@paygate/testing';
import { sql } from 'kysely';
import { loadConfig, type RunningGateway, startGatewayProxy } from '../src';
import { type Harness, skillSnapshot, startHarness, startUpstream } from './harness';

jest.setTimeout(60_000);

describe('gateway-proxy: rate limit shared by replicas', () => {
  let h: Harness;
  let second: RunningGateway;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;

  beforeAll(async () => {
    h = await startHarness('gwrate', { RATE_LIMIT_PER_MINUTE: '6' });
    // A second replica on the same schema and bus: the count must be shared, not per process.
    second = await startGatewayProxy(loadConfig(h.env.envFor('gateway-proxy', h.gatewayEnv), h.clock.now));
    upstream = await startUpstream();
    await h.publishSkill(
      skillSnapshot({
        name: 'sub',
        apiBaseUrl: `${upstream.url}/seller`,
        type: 'Subscription',
        durationDays: 30,
      }),
    );
    await h.publishSkill(
      skillSnapshot({
        name: 'other',
        apiBaseUrl: `${upstream.url}/seller`,
        type: 'Subscription',
        durationDays: 30,
      }),
    );
  });
  afterAll(async () => {
    await second?.stop();
    await upstream?.close();
    await h?.stop();
  });

  const replicas = () => [h.gateway.url, second.url];
  // Windows are whole minutes: start each test just after a boundary so it never straddles one.
  const alignToWindowStart = () => {
    h.clock.set((Math.floor(Date.now() / 60_000) + 1) * 60_000 + 500);
  };

  /**
   * Waits until the replicas have added every hit so far to the shared count of the current window (what each
   * one's flush timer does): the positive signal the next request is decided on, instead of a sleep.
   */
  const sharedHitsReach = (hits: number) =>
    waitFor(
      async () => {
        const nowMs = h.clock.now().getTime();
        const { rows } = await sql<{ hits: number }>`select coalesce(sum(hits), 0)::int hits
          from rate_limit_windows where window_start = ${new Date(nowMs - (nowMs % 60_000))}`.execute(h.db);
        return rows[0]!.hits === hits;
      },
      { message: `the shared count never reached ${hits}` },
    );

  it('defaults to 60 requests per minute', () => {
    const config = loadConfig({ ESCROW_ADDRESS: h.gatewayEnv.ESCROW_ADDRESS, USDC_ADDRESS: h.usdcAddress });
    expect(config.rateLimitPerMinute).toBe(60);
  });

  it('limits a wallet per skill across replicas: 429 with Retry-After and a clear body', async () => {
    alignToWindowStart();
    const txHash = await h.transfer('buyer', 50_000n);
    const header = await h.header({ txHash, resource: h.resource('GET', 'sub', '/data') });
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await fetch(`${replicas()[i % 2]}/api/v1/skills/sub/data`, {
        headers: { 'X-402-Payment': header },
      });
      statuses.push(res.status);
      await res.arrayBuffer();
      await sharedHitsReach(i + 1);
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 200]);
    const over = await fetch(`${second.url}/api/v1/skills/sub/data`, {
      headers: { 'X-402-Payment': header },
    });
    expect(over.status).toBe(429);
    const retryAfter = Number(over.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect((await over.json()).error).toMatchObject({
      code: 'rate_limited',
      limit: 6,
      message: expect.stringContaining('at most 6 requests per minute per wallet per skill'),
    });
    // Another skill has its own window; a new minute starts afresh.
    const other = await fetch(`${h.gateway.url}/api/v1/skills/other/data`);
    expect(other.status).toBe(402);
    await other.arrayBuffer();
    h.clock.advance(60_000);
    const later = await fetch(`${h.gateway.url}/api/v1/skills/sub/data`, {
      headers: { 'X-402-Payment': header },
    });
    expect(later.status).toBe(200);
    await later.arrayBuffer();
    h.clock.advance(-60_000);
  });

  it('limits challenges without a wallet per client address', async () => {
    alignToWindowStart();
    h.clock.advance(120_000);
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++) {
      const res = await fetch(`${replicas()[i % 2]}/api/v1/skills/other/data`);
      statuses.push(res.status);
      await res.arrayBuffer();
      await sharedHitsReach(i + 1);
    }
    expect(statuses.slice(0, 6)).toEqual([402, 402, 402, 402, 402, 402]);
    expect(statuses[6]).toBe(429);
  });
});
