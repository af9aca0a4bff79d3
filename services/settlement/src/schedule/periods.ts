import { createHash } from 'node:crypto';
import type { Frequency } from '../db';

/** A UTC settlement period: DAILY, WEEKLY (from Monday 00:00) or MONTHLY (from the 1st). */
export interface Period {
  frequency: Frequency;
  /** Stable key of the period, unique per seller: D:2026-11-23, W:2026-11-23 (its Monday), M:2026-11. */
  key: string;
  start: Date;
  end: Date;
}

const DAY_MS = 86_400_000;

function utcMidnight(at: Date): Date {
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate()));
}

const isoDate = (d: Date) => d.toISOString().slice(0, 10);

/** `periodSeconds` > 0 (development): ISO-keyed windows, sorting after the day key so none re-opens. */
export function periodAt(frequency: Frequency, at: Date, periodSeconds = 0): Period {
  if (periodSeconds > 0) {
    const lengthMs = periodSeconds * 1000;
    const start = new Date(Math.floor(at.getTime() / lengthMs) * lengthMs);
    return {
      frequency,
      key: `${frequency[0]}:${start.toISOString()}`,
      start,
      end: new Date(start.getTime() + lengthMs),
    };
  }
  const day = utcMidnight(at);
  switch (frequency) {
    case 'DAILY':
      return { frequency, key: `D:${isoDate(day)}`, start: day, end: new Date(day.getTime() + DAY_MS) };
    case 'WEEKLY': {
      const sinceMonday = (day.getUTCDay() + 6) % 7; // getUTCDay: 0 = Sunday
      const start = new Date(day.getTime() - sinceMonday * DAY_MS);
      return { frequency, key: `W:${isoDate(start)}`, start, end: new Date(start.getTime() + 7 * DAY_MS) };
    }
    case 'MONTHLY': {
      const start = new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1));
      const end = new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1));
      return { frequency, key: `M:${isoDate(start).slice(0, 7)}`, start, end };
    }
  }
}

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/** `value`'s low `length` base-32 digits, ULID style. */
function crockford(value: bigint, length: number): string {
  let digits = '';
  for (let i = 0; i < length; i++) {
    digits = CROCKFORD[Number(value % 32n)] + digits;
    value /= 32n;
  }
  return digits;
}

/** `stl_<ulid>` of the period start and a hash of (seller, period): a second scheduler cannot create another. */
export function settlementIdFor(sellerId: string, period: Period): string {
  const digest = createHash('sha256').update(`${sellerId}\u0000${period.key}`).digest();
  const hashBits = BigInt(`0x${digest.subarray(0, 10).toString('hex')}`); // 80 bits
  return `stl_${crockford(BigInt(period.start.getTime()), 10)}${crockford(hashBits, 16)}`;
}
