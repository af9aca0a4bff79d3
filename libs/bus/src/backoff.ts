/**
 * The one retry backoff, a ceiling min(maxMs, baseMs * 2^(attempt-1)). `backoffDelayMs` (full jitter) spreads
 * the job loops' retries of work that failed together; the bus waits the ceiling itself (`backoffCeilingMs`),
 * so a consumer's attempts fix how long a dependency may be down before an event is parked (jitter could
 * spend them in moments), and a polling loop's wait after n failures stays the documented one.
 */
export interface BackoffPolicy {
  baseMs: number;
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
 * The delay after attempt `attempt` (1-based): a uniform draw in [0, backoffCeilingMs], rounded; undefined
 * once `attempt` reaches `maxAttempts`. `random` is in [0, 1) (tests pass a fixed one; 1 gives the ceiling).
 */
export function backoffDelayMs(
  attempt: number,
  policy: BackoffPolicy,
  random: () => number = Math.random,
): number | undefined {
  if (policy.maxAttempts !== undefined && attempt >= policy.maxAttempts) return undefined;
  return Math.round(backoffCeilingMs(attempt, policy) * Math.min(Math.max(random(), 0), 1));
}
