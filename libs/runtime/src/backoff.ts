/**
 * The one retry backoff of the services' job loops: exponential with full jitter, capped, with a bound on attempts.
 * Full jitter (a uniform draw in [0, ceiling]) spreads retries of work that failed together, so they do not all
 * come back at the same moment.
 */
export interface BackoffPolicy {
  /** The ceiling of the first retry's delay; it doubles with each attempt. */
  baseMs: number;
  /** The highest ceiling. */
  maxMs: number;
  /** After this many attempts there is no retry (undefined: the caller never gives up, e.g. a service's loop). */
  maxAttempts?: number;
}

/**
 * The delay before the retry that follows attempt number `attempt` (1-based): a uniform draw in
 * [0, min(maxMs, baseMs * 2^(attempt-1))], rounded to a millisecond; undefined once `attempt` reaches
 * `maxAttempts` (give up). `random` returns a number in [0, 1) (tests pass a fixed one; 1 gives the ceiling).
 */
export function backoffDelayMs(
  attempt: number,
  policy: BackoffPolicy,
  random: () => number = Math.random,
): number | undefined {
  if (policy.maxAttempts !== undefined && attempt >= policy.maxAttempts) return undefined;
  // 2^40 times any base is past every cap: the exponent stops there so the product stays finite.
  const exponent = Math.min(Math.max(attempt - 1, 0), 40);
  const ceiling = Math.min(policy.baseMs * 2 ** exponent, policy.maxMs);
  return Math.round(ceiling * Math.min(Math.max(random(), 0), 1));
}
