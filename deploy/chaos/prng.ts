/**
 * The seeded randomness of a chaos run: every choice (which fault, which replica, how long, which operation)
 * comes from one PRNG seeded by the printed seed, so `CHAOS_SEED=<seed> make chaos` draws the same schedule.
 * (Timing on a busy machine still differs between runs: the schedule is reproduced, not the interleaving.)
 */
export class Prng {
  private state: number;

  constructor(readonly seed: number) {
    this.state = seed >>> 0 || 0x9e3779b9;
  }

  /** mulberry32: a float in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('pick from an empty list');
    return items[Math.floor(this.next() * items.length)]!;
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  /** One key of `weights`, with probability proportional to its weight. */
  weighted<K extends string>(weights: Readonly<Record<K, number>>): K {
    const entries = Object.entries(weights) as Array<[K, number]>;
    const total = entries.reduce((sum, [, w]) => sum + w, 0);
    let r = this.next() * total;
    for (const [key, weight] of entries) {
      r -= weight;
      if (r < 0) return key;
    }
    return entries[entries.length - 1]![0];
  }

  /** An independent stream for one purpose (load, faults), so adding a draw to one never shifts the other. */
  fork(label: string): Prng {
    let h = this.seed >>> 0;
    for (const c of label) h = Math.imul(h ^ c.charCodeAt(0), 0x01000193) >>> 0;
    return new Prng(h);
  }
}

export function newSeed(): number {
  return Math.floor(Math.random() * 2 ** 31);
}
