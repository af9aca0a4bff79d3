/**
 * min(baseMs * 2^(attempt-1), maxMs): the bus's deterministic backoff, for a consumer's redelivery delay and a
 * polling loop's wait after failed passes. Deliberately not @paygate/runtime's `backoffDelayMs` (full jitter):
 *  - the bus library sits below the runtime (the runtime depends on it), so it cannot import it;
 *  - a consumer dead-letters an event after maxAttempts deliveries, so these delays fix how long a handler's
 *    dependency may be down before an event is parked; with full jitter an event could spend its attempts within
 *    moments of an outage. Redeliveries of different events are already spread by when each one failed.
 *  - a polling loop is one per process: there is no crowd of retries to spread, and its documented wait after n
 *    failures (intervalMs * 2^n, capped) stays what operators read in the logs.
 * The ceiling of runtime's `backoffDelayMs` for the same base and cap is this same number.
 */
export function cappedDoublingDelayMs(attempt: number, baseMs: number, maxMs: number): number {
  return Math.min(baseMs * 2 ** Math.max(0, attempt - 1), maxMs);
}
