import { backoffCeilingMs, backoffDelayMs } from '../src/backoff';

const policy = { baseMs: 1000, maxMs: 8000, maxAttempts: 6 };

describe('backoffCeilingMs', () => {
  it('doubles from the base up to the cap, without jitter (the bus: redelivery and polling waits)', () => {
    expect([1, 2, 3, 10].map((n) => backoffCeilingMs(n, { baseMs: 100, maxMs: 1000 }))).toEqual([
      100, 200, 400, 1000,
    ]);
  });
});

describe('backoffDelayMs', () => {
  it('doubles the ceiling with each attempt up to the cap', () => {
    const ceilings = [1, 2, 3, 4, 5].map((attempt) => backoffDelayMs(attempt, policy, () => 1));
    expect(ceilings).toEqual([1000, 2000, 4000, 8000, 8000]);
  });

  it('draws the delay uniformly below the ceiling (full jitter)', () => {
    expect(backoffDelayMs(3, policy, () => 0)).toBe(0);
    expect(backoffDelayMs(3, policy, () => 0.5)).toBe(2000);
    for (let i = 0; i < 200; i++) {
      const delay = backoffDelayMs(4, policy)!;
      expect(delay).toBeGreaterThanOrEqual(0);
      expect(delay).toBeLessThanOrEqual(8000);
    }
  });

  it('gives up once the attempts are spent, and never without a bound', () => {
    expect(backoffDelayMs(5, policy, () => 1)).toBe(8000);
    expect(backoffDelayMs(6, policy, () => 1)).toBeUndefined();
    expect(backoffDelayMs(1000, { baseMs: 1000, maxMs: 8000 }, () => 1)).toBe(8000);
  });

  it('stays finite for huge attempt numbers and treats attempt 0 as the first', () => {
    expect(backoffDelayMs(Number.MAX_SAFE_INTEGER, { baseMs: 30_000, maxMs: 21_600_000 }, () => 1)).toBe(
      21_600_000,
    );
    expect(backoffDelayMs(0, policy, () => 1)).toBe(1000);
  });
});
