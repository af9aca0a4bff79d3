import type { AttemptOutcome } from '../db';

/** 2xx delivered; 408, 429 and 5xx retried; anything else (3xx are not followed, other 4xx) is final. */
export function classifyStatus(status: number): AttemptOutcome {
  if (status >= 200 && status < 300) return 'delivered';
  if (status === 408 || status === 429 || status >= 500) return 'retryable';
  return 'permanent';
}

/**
 * Attempts of one delivery at the most. The retry window (WEBHOOK_RETRY_WINDOW_HOURS) ends a delivery first in
 * practice: with full jitter, 72 h hold about 33 attempts on average; this bound only keeps the count finite.
 */
export const MAX_WEBHOOK_ATTEMPTS = 50;
