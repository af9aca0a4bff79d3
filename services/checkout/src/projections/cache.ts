import type { CheckoutMatchingMode } from '@paygate/contracts';
import { LRUCache } from 'lru-cache';
import type { CheckoutDb, SkillsTable } from '../db';

interface CachedSeller {
  sellerId: string;
  matching: CheckoutMatchingMode;
}

export type CachedSkill = Pick<
  SkillsTable,
  'skill_id' | 'seller_id' | 'name' | 'display_name' | 'status' | 'hold_period_hours' | 'endpoints'
>;

/** Upper bound on cached entries: past it the least recently used entry goes. */
const MAX_ENTRIES = 20_000;

/**
 * Read-through cache of the projections for session creation. `ttlMs` bounds staleness from other replicas'
 * commits; this replica's own drop entries at once; misses are not cached.
 */
export class ProjectionCache {
  private readonly sellers = new LRUCache<string, { value: CachedSeller; until: number }>({
    max: MAX_ENTRIES,
  });
  private readonly skills = new LRUCache<string, { value: CachedSkill; until: number }>({ max: MAX_ENTRIES });
  /** Counts invalidations: a row read before one may be stale (a rotated-out key), so it is not cached. */
  private invalidations = 0;

  constructor(
    private readonly db: CheckoutDb,
    private readonly ttlMs: number,
    private readonly clockMs: () => number = () => performance.now(),
  ) {}

  async sellerByPublishableKey(publishableKey: string): Promise<CachedSeller | undefined> {
    const hit = this.sellers.get(publishableKey);
    if (hit && hit.until > this.clockMs()) return hit.value;
    const invalidationsAtRead = this.invalidations;
    const row = await this.db
      .selectFrom('sellers')
      .select(['seller_id', 'checkout_matching'])
      .where('publishable_key', '=', publishableKey)
      .executeTakeFirst();
    if (!row) return undefined;
    const value = { sellerId: row.seller_id, matching: row.checkout_matching };
    if (this.invalidations === invalidationsAtRead) this.put(this.sellers, publishableKey, value);
    return value;
  }

  /** How a seller's sessions are matched (`amount` for a seller not projected yet). */
  async matchingOf(sellerId: string): Promise<CheckoutMatchingMode> {
    const key = `id\n${sellerId}`;
    const hit = this.sellers.get(key);
    if (hit && hit.until > this.clockMs()) return hit.value.matching;
    const invalidationsAtRead = this.invalidations;
    const row = await this.db
      .selectFrom('sellers')
      .select(['seller_id', 'checkout_matching'])
      .where('seller_id', '=', sellerId)
      .executeTakeFirst();
    const value = { sellerId, matching: row?.checkout_matching ?? 'amount' };
    if (row && this.invalidations === invalidationsAtRead) this.put(this.sellers, key, value);
    return value.matching;
  }

  async skill(sellerId: string, name: string): Promise<CachedSkill | undefined> {
    const key = `${sellerId}\n${name}`;
    const hit = this.skills.get(key);
    if (hit && hit.until > this.clockMs()) return hit.value;
    const invalidationsAtRead = this.invalidations;
    const row = await this.db
      .selectFrom('skills')
      .select(['skill_id', 'seller_id', 'name', 'display_name', 'status', 'hold_period_hours', 'endpoints'])
      .where('seller_id', '=', sellerId)
      .where('name', '=', name)
      .executeTakeFirst();
    if (!row) return undefined;
    if (this.invalidations === invalidationsAtRead) this.put(this.skills, key, row);
    return row;
  }

  /** After a seller.updated commit: its publishable key may have been rotated, so forget every key. */
  invalidateSellers(): void {
    this.invalidations++;
    this.sellers.clear();
  }

  /** After a skill.updated commit: the skill may have been renamed or moved, so forget every entry of it. */
  invalidateSkill(skillId: string, sellerId: string): void {
    this.invalidations++;
    const stale = [...this.skills.entries()].filter(
      ([, entry]) => entry.value.skill_id === skillId || entry.value.seller_id === sellerId,
    );
    for (const [key] of stale) this.skills.delete(key);
  }

  private put<V>(map: LRUCache<string, { value: V; until: number }>, key: string, value: V): void {
    if (this.ttlMs <= 0) return;
    map.set(key, { value, until: this.clockMs() + this.ttlMs });
  }
}
