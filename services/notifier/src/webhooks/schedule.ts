export type ResponseClass = 'delivered' | 'retryable' | 'permanent';

/** 2xx delivered; 408, 429 and 5xx retried; anything else (3xx are not followed, other 4xx) is final. */
export function classifyStatus(status: number): ResponseClass {
  if (status >= 200 && status < 300) return 'delivered';
  if (status === 408 || status === 429 || status >= 500) return 'retryable';
  return 'permanent';
}

/**
 * Delay before the retry that follows attempt number `attempt` (1-based): base * 2^(attempt-1), capped,
 * scaled by a random factor in [0.8, 1] so that many deliveries failing together do not retry together.
 */
export function retryDelayMs(
  attempt: number,
  options: { baseDelayMs: number; maxDelayMs: number },
  random: () => number = Math.random,
): number {
  const exponent = Math.min(Math.max(attempt - 1, 0), 40);
  const raw = Math.min(options.baseDelayMs * 2 ** exponent, options.maxDelayMs);
  return Math.round(raw * (0.8 + 0.2 * random()));
}
