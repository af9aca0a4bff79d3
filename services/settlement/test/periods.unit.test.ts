/** Settlement periods (UTC) and the settlement id each seller and period always gets. */
import fc from 'fast-check';
import { periodAt, settlementIdFor } from '../src/schedule/periods';

const at = (iso: string) => new Date(iso);

describe('periodAt', () => {
  it('DAILY is the UTC day, keyed by its date', () => {
    expect(periodAt('DAILY', at('2026-11-23T23:59:59.999Z'))).toEqual({
      frequency: 'DAILY',
      key: 'D:2026-11-23',
      start: at('2026-11-23T00:00:00Z'),
      end: at('2026-11-24T00:00:00Z'),
    });
    expect(periodAt('DAILY', at('2026-11-24T00:00:00Z')).key).toBe('D:2026-11-24');
  });

  it('WEEKLY starts on Monday 00:00 UTC, a Sunday belonging to the week before', () => {
    // 2026-11-23 is a Monday.
    expect(periodAt('WEEKLY', at('2026-11-23T00:00:00Z')).key).toBe('W:2026-11-23');
    expect(periodAt('WEEKLY', at('2026-11-29T23:59:59Z'))).toMatchObject({
      key: 'W:2026-11-23',
      start: at('2026-11-23T00:00:00Z'),
      end: at('2026-11-30T00:00:00Z'),
    });
    expect(periodAt('WEEKLY', at('2026-11-30T00:00:00Z')).key).toBe('W:2026-11-30');
  });

  it('MONTHLY runs from the 1st to the next 1st, across a year and a leap February', () => {
    expect(periodAt('MONTHLY', at('2026-12-31T23:00:00Z'))).toMatchObject({
      key: 'M:2026-12',
      start: at('2026-12-01T00:00:00Z'),
      end: at('2027-01-01T00:00:00Z'),
    });
    expect(periodAt('MONTHLY', at('2028-02-29T12:00:00Z')).end).toEqual(at('2028-03-01T00:00:00Z'));
  });

  it('a fixed window of periodSeconds replaces every frequency, keyed after the day key', () => {
    const period = periodAt('WEEKLY', at('2026-11-23T10:04:59Z'), 60);
    expect(period).toEqual({
      frequency: 'WEEKLY',
      key: 'W:2026-11-23T10:04:00.000Z',
      start: at('2026-11-23T10:04:00Z'),
      end: at('2026-11-23T10:05:00Z'),
    });
    // Moving between the two never re-opens a period already scheduled that day.
    expect(period.key > periodAt('WEEKLY', at('2026-11-23T10:04:59Z')).key).toBe(true);
  });

  it('always contains its instant, and the next period starts where it ends', () => {
    const frequencies = ['DAILY', 'WEEKLY', 'MONTHLY'] as const;
    fc.assert(
      fc.property(
        fc.constantFrom(...frequencies),
        fc.date({ min: at('2000-01-01T00:00:00Z'), max: at('2100-01-01T00:00:00Z'), noInvalidDate: true }),
        (frequency, instant) => {
          const period = periodAt(frequency, instant);
          expect(period.start.getTime()).toBeLessThanOrEqual(instant.getTime());
          expect(instant.getTime()).toBeLessThan(period.end.getTime());
          expect(periodAt(frequency, period.end).start).toEqual(period.end);
          expect(periodAt(frequency, new Date(period.end.getTime() - 1)).key).toBe(period.key);
        },
      ),
    );
  });
});

describe('settlementIdFor', () => {
  const period = periodAt('DAILY', at('2026-11-23T10:00:00Z'));

  it('is the same for the same seller and period, and a 26-character ULID after stl_', () => {
    const id = settlementIdFor('seller-1', period);
    expect(settlementIdFor('seller-1', periodAt('DAILY', at('2026-11-23T22:00:00Z')))).toBe(id);
    expect(id).toMatch(/^stl_[0-9A-HJKMNP-TV-Z]{26}$/);
  });

  it('differs by seller and by period, and sorts by the period start', () => {
    const next = periodAt('DAILY', at('2026-11-24T10:00:00Z'));
    expect(settlementIdFor('seller-2', period)).not.toBe(settlementIdFor('seller-1', period));
    expect(settlementIdFor('seller-1', next) > settlementIdFor('seller-1', period)).toBe(true);
    expect(settlementIdFor('seller-1', period).slice(4, 14)).toBe(
      settlementIdFor('seller-2', period).slice(4, 14),
    );
  });
});
