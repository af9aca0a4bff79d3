import { type RateDecision, SharedRateLimiter } from '@paygate/http';
import { migrateToLatest } from '@paygate/runtime';
import { createTestEnvironment, holdTableLock, openSchema, type TestEnvironment } from '@paygate/testing';
import { type Kysely, sql } from 'kysely';
import { migrations } from '../migrations';

/** The limiter against real Postgres, on a clock the test moves (the limiter reads no other). */
describe('SharedRateLimiter', () => {
  let env: TestEnvironment;
  let db: Kysely<any>;
  let nowMs = Date.UTC(2026, 10, 22, 12, 0, 0, 500);
  const clock = () => new Date(nowMs);

  beforeAll(async () => {
    env = await createTestEnvironment('gwlimiter');
    const schema = env.schemaFor('gateway-proxy');
    db = openSchema(schema);
    await migrateToLatest(db, schema, migrations);
  });
  afterAll(async () => {
    await db.destroy();
    await env.cleanup();
  });

  const sharedHits = async (bucket: string) =>
    Number(
      (await sql<{ hits: number }>`select hits from rate_limit_windows where bucket = ${bucket}`.execute(db))
        .rows[0]?.hits ?? 0,
    );
  /** Makes the next writes fail the way a lost connection or a failover does, then heals. */
  const breakWrites = () => sql`alter table rate_limit_windows rename to rate_limit_windows_away`.execute(db);
  const healWrites = () => sql`alter table rate_limit_windows_away rename to rate_limit_windows`.execute(db);

  it('keeps hits counted locally when their write fails, and writes them with the next one', async () => {
    const limiter = new SharedRateLimiter(db, 10, clock, { freshMs: 1000 });
    await limiter.hit('flush-fails'); // written: shared count 1, fresh
    for (let i = 0; i < 3; i++) expect(limiter.tryLocal('flush-fails')).toMatchObject({ allowed: true });
    await breakWrites();
    await expect(limiter.flush()).rejects.toThrow();
    await healWrites();
    await limiter.flush();
    expect(await sharedHits('flush-fails')).toBe(4);

    // The same through a hit that has to ask Postgres (the count is stale): its write fails, the hits before
    // it are kept; the failed hit itself was not allowed, so it is not counted.
    expect(limiter.tryLocal('flush-fails')).toMatchObject({ allowed: true, remaining: 5 });
    nowMs += 1500;
    await breakWrites();
    await expect(limiter.hit('flush-fails')).rejects.toThrow();
    await healWrites();
    expect(await limiter.hit('flush-fails')).toMatchObject({ allowed: true, remaining: 4 });
    expect(await sharedHits('flush-fails')).toBe(6);
  });

  it('allows no more than the limit while its own writes are under way (Postgres slow)', async () => {
    const limiter = new SharedRateLimiter(db, 5, clock, { freshMs: 1000 });
    expect(await limiter.hit('slow-writes')).toMatchObject({ allowed: true }); // written: shared count 1, fresh
    // Another session holds the table: every write of the limiter waits, as on a busy Postgres.
    const holder = openSchema(env.schemaFor('gateway-proxy'));
    const lock = await holdTableLock(holder, 'rate_limit_windows');
    // A flush tick between every two hits: the hits it takes out of pending are still on their way to Postgres.
    const decisions: Promise<RateDecision>[] = [];
    const flushes: Promise<void>[] = [];
    for (let i = 0; i < 10; i++) {
      flushes.push(limiter.flush());
      decisions.push(limiter.hit('slow-writes'));
    }
    await lock.release();
    await holder.destroy();
    const allowed = (await Promise.all(decisions)).filter((decision) => decision.allowed);
    await Promise.all(flushes);
    expect(allowed).toHaveLength(4);
    await limiter.stop();
    expect(await sharedHits('slow-writes')).toBe(11);
  });

  it('ages the shared count on the clock that cuts its windows', async () => {
    const limiter = new SharedRateLimiter(db, 10, clock, { freshMs: 1000 });
    await limiter.hit('one-clock');
    expect(limiter.tryLocal('one-clock')).toMatchObject({ allowed: true });
    // One second later on the limiter's clock (however little real time passed), the count is stale: the
    // next decision asks Postgres instead of trusting what may have changed on other replicas.
    nowMs += 1000;
    expect(limiter.tryLocal('one-clock')).toBeUndefined();
    expect(await limiter.hit('one-clock')).toMatchObject({ allowed: true, remaining: 7 });
    expect(limiter.tryLocal('one-clock')).toMatchObject({ allowed: true, remaining: 6 });
    await limiter.stop();
    expect(await sharedHits('one-clock')).toBe(4);
  });
  it('hitThen counts the second bucket only when the first allowed it, in one statement, as two hits would', async () => {
    const day = { windowMs: 24 * 60 * 60_000, freshMs: 0 };
    const perPayer = new SharedRateLimiter(db, 2, clock, day);
    const perSeller = new SharedRateLimiter(db, 3, clock, day);
    const decisions = [];
    for (let i = 0; i < 3; i++)
      decisions.push(await perPayer.hitThen('then-payer-a', perSeller, 'then-seller'));
    expect(decisions.map(([payer, seller]) => [payer.allowed, seller?.allowed])).toEqual([
      [true, true],
      [true, true],
      [false, undefined],
    ]);
    // The payer over its budget counted nothing on the seller's.
    expect(await sharedHits('then-payer-a')).toBe(3);
    expect(await sharedHits('then-seller')).toBe(2);
    // Another payer: the seller's third is allowed, its fourth refused (and counted, as hit counts a refusal).
    expect((await perPayer.hitThen('then-payer-b', perSeller, 'then-seller'))[1]).toMatchObject({
      allowed: true,
      remaining: 0,
    });
    const [payerB, sellerOver] = await perPayer.hitThen('then-payer-b', perSeller, 'then-seller');
    expect(payerB).toMatchObject({ allowed: true, remaining: 0 });
    expect(sellerOver).toMatchObject({ allowed: false, limit: 3, remaining: 0 });
    expect(sellerOver!.retryAfterSeconds).toBeGreaterThan(0);
    expect(await sharedHits('then-seller')).toBe(4);
  });
});
