import { holdTableLock } from '@paygate/testing';
import { ProjectionCache } from '../src/projections/cache';
import { type CheckoutHarness, startHarness } from './helpers';

describe('the projection cache of the session-creation path', () => {
  let h: CheckoutHarness;
  beforeAll(async () => {
    h = await startHarness('projcache');
  });
  afterAll(() => h?.stop());

  it('keeps no seller read before an invalidation: it may be the revision with a rotated-out publishable key', async () => {
    const db = h.service.ctx.db;
    const cache = new ProjectionCache(db, 60_000);
    // Another transaction holds the projection table, so the cache's read waits while seller.updated is consumed.
    const lock = await holdTableLock(db, 'sellers');
    const read = cache.sellerByPublishableKey(h.publishableKey);
    await new Promise((resolve) => setImmediate(resolve));
    cache.invalidateSellers();
    await lock.release();
    expect(await read).toEqual({ sellerId: h.sellerId, matching: 'amount' });
    // The key is rotated in the projection: a cached answer would still open sessions with the old key.
    await db
      .updateTable('sellers')
      .set({ publishable_key: 'pk_test_rotated_projection_cache' })
      .where('seller_id', '=', h.sellerId)
      .execute();
    expect(await cache.sellerByPublishableKey(h.publishableKey)).toBeUndefined();
    expect(await cache.sellerByPublishableKey('pk_test_rotated_projection_cache')).toEqual({
      sellerId: h.sellerId,
      matching: 'amount',
    });
  });
});
