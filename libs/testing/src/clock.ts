/**
 * The one test clock: time stands still until the test moves it, so a hold's release, a session's expiry or a
 * webhook's next attempt is reached by `advance`, never by waiting. `now` is an arrow property so it can be handed
 * to a service as its clock (`{ now: clock.now }` or `() => clock.now()`) without binding.
 */
export class TestClock {
  private currentMs: number;

  constructor(start: Date | string | number = Date.now()) {
    this.currentMs = new Date(start).getTime();
    if (Number.isNaN(this.currentMs)) throw new RangeError(`TestClock: ${String(start)} is not a time`);
  }

  /** A fresh Date each call: a caller that mutates it does not move the clock. */
  readonly now = (): Date => new Date(this.currentMs);

  nowMs(): number {
    return this.currentMs;
  }

  set(at: Date | string | number): void {
    const ms = new Date(at).getTime();
    if (Number.isNaN(ms)) throw new RangeError(`TestClock.set: ${String(at)} is not a time`);
    this.currentMs = ms;
  }

  /** Moves forward (a negative step is refused: services assume their clock does not run back). */
  advance(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0)
      throw new RangeError(`TestClock.advance: ${ms} ms is not a step forward`);
    this.currentMs += ms;
  }

  advanceSeconds(seconds: number): void {
    this.advance(seconds * 1000);
  }

  advanceHours(hours: number): void {
    this.advance(hours * 3_600_000);
  }
}
