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

type Entries<V> = LRUCache<string, { value: V; until: number }>;

/** Upper bound on cached entries: past it the least recently used entry goes. */
const MAX_ENTRIES = 20_000;

/**
 * Read-through cache of the projections for session creation. `ttlMs` bounds staleness from other replicas'
 * commits; this replica's own drop entries at once; misses are not cached.
 */
export class ProjectionCache {
  private readonly sellers: Entries<CachedSeller> = new LRUCache({ max: MAX_ENTRIES });
  private readonly skills: Entries<CachedSkill> = new LRUCache({ max: MAX_ENTRIES });
  /** Counts invalidations: a row read before one may be stale (a rotated-out key), so it is not cached. */
  private invalidations = 0;

  constructor(
    private readonly db: CheckoutDb,
    private readonly ttlMs: number,
  ) {}

  sellerByPublishableKey(publishableKey: string): Promise<CachedSeller | undefined> {
    return this.readThrough(this.sellers, publishableKey, () =>
      this.loadSeller('publishable_key', publishableKey),
    );
  }

  /** How a seller's sessions are matched (`amount` for a seller not projected yet). */
  async matchingOf(sellerId: string): Promise<CheckoutMatchingMode> {
    const seller = await this.readThrough(this.sellers, `id\n${sellerId}`, () =>
      this.loadSeller('seller_id', sellerId),
    );
    return seller?.matching ?? 'amount';
  }

  skill(sellerId: string, name: string): Promise<CachedSkill | undefined> {
    return this.readThrough(this.skills, `${sellerId}\n${name}`, () =>
      this.db
        .selectFrom('skills')
        .select(['skill_id', 'seller_id', 'name', 'display_name', 'status', 'hold_period_hours', 'endpoints'])
        .where('seller_id', '=', sellerId)
        .where('name', '=', name)
        .executeTakeFirst(),
    );
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

  private async loadSeller(column: 'publishable_key' | 'seller_id', value: string) {
    const row = await this.db
      .selectFrom('sellers')
      .select(['seller_id', 'checkout_matching'])
      .where(column, '=', value)
      .executeTakeFirst();
    return row && { sellerId: row.seller_id, matching: row.checkout_matching };
  }

  private async readThrough<V>(map: Entries<V>, key: string, load: () => Promise<V | undefined>) {
    const hit = map.get(key);
    if (hit && hit.until > performance.now()) return hit.value;
    const invalidationsAtRead = this.invalidations;
    const value = await load();
    if (value !== undefined && this.ttlMs > 0 && this.invalidations === invalidationsAtRead)
      map.set(key, { value, until: performance.now() + this.ttlMs });
    return value;
  }
}
