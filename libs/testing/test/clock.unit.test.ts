import { TestClock } from '../src/clock';

describe('TestClock', () => {
  it('stands still until advanced', () => {
    const clock = new TestClock('2026-01-01T00:00:00Z');
    expect(clock.now().toISOString()).toBe('2026-01-01T00:00:00.000Z');
    clock.advance(1500);
    clock.advanceSeconds(2);
    clock.advanceHours(1);
    expect(clock.now().toISOString()).toBe('2026-01-01T01:00:03.500Z');
    expect(clock.nowMs()).toBe(Date.parse('2026-01-01T01:00:03.500Z'));
  });

  it('can be set to any instant, and its now works unbound', () => {
    const clock = new TestClock(0);
    const { now } = clock;
    clock.set('2030-05-05T05:05:05Z');
    expect(now().toISOString()).toBe('2030-05-05T05:05:05.000Z');
  });

  it('hands out copies: mutating a returned Date does not move it', () => {
    const clock = new TestClock(1000);
    clock.now().setTime(0);
    expect(clock.nowMs()).toBe(1000);
  });

  it('moves back by a negative step, and refuses a step or a time that is not one', () => {
    const clock = new TestClock(1000);
    clock.advance(-400);
    expect(clock.nowMs()).toBe(600);
    expect(() => clock.advance(Number.NaN)).toThrow(RangeError);
    expect(() => clock.set('not a time')).toThrow(/not a time/);
    expect(() => new TestClock(Number.NaN)).toThrow(RangeError);
  });

  it('ticking: runs with real time from where it was set or advanced to', async () => {
    const clock = new TestClock('2026-01-01T00:00:00Z', { ticking: true });
    clock.advanceHours(2);
    const before = clock.nowMs();
    const realBefore = Date.now();
    while (Date.now() === realBefore) await new Promise((resolve) => setImmediate(resolve));
    expect(clock.nowMs()).toBeGreaterThan(before);
    expect(before).toBeGreaterThanOrEqual(Date.parse('2026-01-01T02:00:00Z'));
    expect(before - Date.parse('2026-01-01T02:00:00Z')).toBeLessThan(1000);
  });
});
