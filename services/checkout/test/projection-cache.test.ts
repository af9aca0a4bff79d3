import { sql } from 'kysely';
import { ProjectionCache } from '../src/projections/cache';
import { type CheckoutHarness, startHarness } from './helpers';

describe('the projection cache of the session-creation path', () => {
  let h: CheckoutHarness;
  beforeAll(async () => {
    h = await startHarness('projcache');
  });
  afterAll(() => h?.stop());

  it('keeps no seller read before an invalidation: it may be the revision with a rotated-out publishable key', async () => {
    const db = h.running.ctx.db;
    const cache = new ProjectionCache(db, 60_000);
    let releaseLock: (() => void) | undefined;
    let locked: (() => void) | undefined;
    const lockTaken = new Promise<void>((resolve) => (locked = resolve));
    // Another transaction holds the projection table, so the cache's read waits while seller.updated is consumed.
    const holder = db.transaction().execute(async (trx) => {
      await sql`lock table sellers in access exclusive mode`.execute(trx);
      locked?.();
      await new Promise<void>((resolve) => (releaseLock = resolve));
    });
    await lockTaken;
    const read = cache.sellerByPublishableKey(h.publishableKey);
    await new Promise((resolve) => setImmediate(resolve));
    cache.invalidateSellers();
    releaseLock?.();
    await holder;
    expect(await read).toEqual({ sellerId: h.sellerId });
    // The key is rotated in the projection: a cached answer would still open sessions with the old key.
    await db
      .updateTable('sellers')
      .set({ publishable_key: 'pk_test_rotated_projection_cache' })
      .where('seller_id', '=', h.sellerId)
      .execute();
    expect(await cache.sellerByPublishableKey(h.publishableKey)).toBeUndefined();
    expect(await cache.sellerByPublishableKey('pk_test_rotated_projection_cache')).toEqual({
      sellerId: h.sellerId,
    });
  });
});
