/**
 * The one retry backoff: a ceiling that doubles with each attempt up to a cap, min(maxMs, baseMs * 2^(attempt-1)).
 * Two ways to wait under it:
 *  - `backoffDelayMs`, full jitter (a uniform draw in [0, ceiling]), for the services' job loops: it spreads retries
 *    of work that failed together, so they do not all come back at the same moment;
 *  - the ceiling itself (`backoffCeilingMs`), for the bus: a consumer dead-letters an event after maxAttempts
 *    deliveries, so these delays fix how long a handler's dependency may be down before an event is parked (with
 *    jitter an event could spend its attempts within moments of an outage), and a polling loop is one per process,
 *    whose documented wait after n failures (intervalMs * 2^n, capped) stays what operators read in the logs.
 */
export interface BackoffPolicy {
  /** The ceiling of the first retry's delay; it doubles with each attempt. */
  baseMs: number;
  /** The highest ceiling. */
  maxMs: number;
  /** After this many attempts there is no retry (undefined: the caller never gives up, e.g. a service's loop). */
  maxAttempts?: number;
}

/** min(maxMs, baseMs * 2^(attempt-1)) for attempt n (1-based; 0 counts as the first). */
export function backoffCeilingMs(attempt: number, policy: Pick<BackoffPolicy, 'baseMs' | 'maxMs'>): number {
  // 2^40 times any base is past every cap: the exponent stops there so the product stays finite.
  const exponent = Math.min(Math.max(attempt - 1, 0), 40);
  return Math.min(policy.baseMs * 2 ** exponent, policy.maxMs);
}

/**
 * The delay before the retry that follows attempt number `attempt` (1-based): a uniform draw in
 * [0, backoffCeilingMs], rounded to a millisecond; undefined once `attempt` reaches `maxAttempts` (give up).
 * `random` returns a number in [0, 1) (tests pass a fixed one; 1 gives the ceiling).
 */
export function backoffDelayMs(
  attempt: number,
  policy: BackoffPolicy,
  random: () => number = Math.random,
): number | undefined {
  if (policy.maxAttempts !== undefined && attempt >= policy.maxAttempts) return undefined;
  return Math.round(backoffCeilingMs(attempt, policy) * Math.min(Math.max(random(), 0), 1));
}
