/**
 * The one retry backoff, a ceiling min(maxMs, baseMs * 2^(attempt-1)). Job loops use full jitter
 * (`backoffDelayMs`); the bus waits the ceiling, so a consumer's attempts fix how long a dependency may be down
 * before an event is parked.
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

/** A uniform draw in [0, backoffCeilingMs] after attempt `attempt` (1-based); undefined once at `maxAttempts`. */
export function backoffDelayMs(
  attempt: number,
  policy: BackoffPolicy,
  random: () => number = Math.random,
): number | undefined {
  if (policy.maxAttempts !== undefined && attempt >= policy.maxAttempts) return undefined;
  return Math.round(backoffCeilingMs(attempt, policy) * Math.min(Math.max(random(), 0), 1));
}
