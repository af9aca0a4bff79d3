import type { AttemptOutcome } from '../db';

/** 2xx delivered; 408, 429 and 5xx retried; anything else (3xx are not followed, other 4xx) is final. */
export function classifyStatus(status: number): AttemptOutcome {
  if (status >= 200 && status < 300) return 'delivered';
  if (status === 408 || status === 429 || status >= 500) return 'retryable';
  return 'permanent';
}

/** A bound that keeps attempts finite: the 72 h window (about 33 jittered attempts) ends a delivery first. */
export const MAX_WEBHOOK_ATTEMPTS = 50;
