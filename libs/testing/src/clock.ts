/** Still until moved (a retry comes by `advance`, not by waiting), or ticking on from where set (leases). */
export class TestClock {
  private atMs: number;
  /** Real time when `atMs` was last set (ticking clocks add what passed since). */
  private anchorMs = Date.now();
  readonly ticking: boolean;

  constructor(start: Date | string | number = Date.now(), options: { ticking?: boolean } = {}) {
    this.atMs = timeOf(start, 'TestClock');
    this.ticking = options.ticking ?? false;
  }

  /** An arrow (`{ now: clock.now }`), a new Date each call: mutating one does not move the clock. */
  readonly now = (): Date => new Date(this.nowMs());

  nowMs(): number {
    return this.ticking ? this.atMs + (Date.now() - this.anchorMs) : this.atMs;
  }

  set(at: Date | string | number): void {
    this.atMs = timeOf(at, 'TestClock.set');
    this.anchorMs = Date.now();
  }

  /** Moves by `ms` (negative moves back: a test restoring the time it jumped from). */
  advance(ms: number): void {
    if (!Number.isFinite(ms)) throw new RangeError(`TestClock.advance: ${ms} ms is not a step`);
    this.atMs += ms;
  }

  advanceSeconds(seconds: number): void {
    this.advance(seconds * 1000);
  }

  advanceHours(hours: number): void {
    this.advance(hours * 3_600_000);
  }
}

function timeOf(at: Date | string | number, what: string): number {
  const ms = new Date(at).getTime();
  if (Number.isNaN(ms)) throw new RangeError(`${what}: ${String(at)} is not a time`);
  return ms;
}
