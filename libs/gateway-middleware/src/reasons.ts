/**
 * The codes the middleware answers itself in its error envelope (error-answers.ts). A refusal Paygate decided (a
 * ticket's, a forwarded request's, a facilitator's) keeps the code it was given.
 */
export const MIDDLEWARE_REASONS = {
  /** 429: Paygate is limiting this seller's verifications; Retry-After and `retryAfterSeconds` say when to retry. */
  rateLimited: 'rate_limited',
  /** 500 (docs/api.md's middleware answer): Paygate could not be reached within the timeout, or answered 5xx. */
  paygateUnavailable: 'paygate_unavailable',
} as const;
