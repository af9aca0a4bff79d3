import type { EventData } from '@paygate/contracts';
import type { PaymentKind } from '@paygate/protocol';
import { type Kysely, sql, type Transaction } from 'kysely';
import { LRUCache } from 'lru-cache';
import type { GatewayDatabase } from '../db';

export type SkillSnapshot = EventData<'skill.updated'>;
export type EndpointSnapshot = SkillSnapshot['endpoints'][number];

/** Applies a skill.updated snapshot; an older or equal revision (redelivery, reordering) changes nothing. */
export async function applySkillUpdated(
  trx: Transaction<GatewayDatabase>,
  snapshot: SkillSnapshot,
): Promise<void> {
  await sql`
    insert into skills (skill_id, name, revision, snapshot, updated_at)
    values (${snapshot.skillId}, ${snapshot.name}, ${snapshot.revision}, ${JSON.stringify(snapshot)}::jsonb, now())
    on conflict (skill_id) do update
      set name = excluded.name, revision = excluded.revision, snapshot = excluded.snapshot, updated_at = now()
      where skills.revision < excluded.revision`.execute(trx);
}

interface CacheEntry {
  skill: SkillSnapshot | undefined;
  expiresAt: number;
}

/** The projection by skill name, cached `cacheTtlMs` (a change through this replica is seen at once). */
export class SkillDirectory {
  private readonly cache = new LRUCache<string, CacheEntry>({ max: 10_000 });
  /** A row read before an invalidation may be the revision it replaced: it answers its call but is not cached. */
  private invalidations = 0;

  constructor(
    private readonly db: Kysely<GatewayDatabase>,
    private readonly cacheTtlMs = 1000,
  ) {}

  invalidate(): void {
    this.invalidations++;
    this.cache.clear();
  }

  peek(name: string): { skill: SkillSnapshot | undefined } | undefined {
    const cached = this.cache.get(name);
    return cached && cached.expiresAt > Date.now() ? { skill: cached.skill } : undefined;
  }

  async byName(name: string): Promise<SkillSnapshot | undefined> {
    const now = Date.now();
    const cached = this.cache.get(name);
    if (cached && cached.expiresAt > now) return cached.skill;
    const invalidationsAtRead = this.invalidations;
    // Names are unique in the registry; after a rename the newest revision holding the name wins.
    const row = await this.db
      .selectFrom('skills')
      .select(['snapshot'])
      .where('name', '=', name)
      .orderBy('updated_at', 'desc')
      .limit(1)
      .executeTakeFirst();
    const skill = row ? (row.snapshot as SkillSnapshot) : undefined;
    if (this.invalidations === invalidationsAtRead)
      this.cache.set(name, { skill, expiresAt: now + this.cacheTtlMs });
    return skill;
  }
}

/** A `:param` matches one non-empty segment, never `.` or `..` (the seller could resolve it to another path). */
function endpointMatches(pattern: string, path: string): boolean {
  if (pattern === path) return true;
  if (!pattern.includes(':')) return false;
  const a = pattern.split('/');
  const b = path.split('/');
  if (a.length !== b.length) return false;
  return a.every((segment, i) => (segment.startsWith(':') ? isParamValue(b[i] ?? '') : segment === b[i]));
}

const DOT_SEGMENT = /^(\.|%2e){1,2}$/i;
function isParamValue(segment: string): boolean {
  return segment.length > 0 && !DOT_SEGMENT.test(segment);
}

/** At the first differing segment a static one beats a parameter; the registry makes the order total. */
function moreSpecificFirst(a: EndpointSnapshot, b: EndpointSnapshot): number {
  const x = a.path.split('/');
  const y = b.path.split('/');
  for (let i = 0; i < x.length && i < y.length; i++) {
    const xParam = x[i]!.startsWith(':');
    const yParam = y[i]!.startsWith(':');
    if (xParam !== yParam) return xParam ? 1 : -1;
  }
  return 0;
}

export type EndpointLookup =
  | { kind: 'found'; endpoint: EndpointSnapshot }
  | { kind: 'no_path' }
  | { kind: 'wrong_method'; allowed: string[] };

export function findEndpoint(skill: SkillSnapshot, method: string, path: string): EndpointLookup {
  const onPath = skill.endpoints.filter((e) => e.active && endpointMatches(e.path, path));
  if (onPath.length === 0) return { kind: 'no_path' };
  const forMethod = onPath.filter((e) => e.method === method);
  if (forMethod.length > 0) return { kind: 'found', endpoint: forMethod.sort(moreSpecificFirst)[0]! };
  return { kind: 'wrong_method', allowed: [...new Set(onPath.map((e) => e.method))] };
}

const KIND_OF_TYPE: Partial<Record<SkillSnapshot['type'], PaymentKind>> = {
  Subscription: 'subscription',
  SaaS: 'subscription',
  Product: 'product',
  Service: 'service',
};

export const paymentKindOf = (type: SkillSnapshot['type']): PaymentKind => KIND_OF_TYPE[type] ?? 'payPerCall';
