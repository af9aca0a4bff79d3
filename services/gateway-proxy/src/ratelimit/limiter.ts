// The shared Postgres-counted limiter now lives in @paygate/runtime (checkout limits session creation with it).
export { type RateDecision, SharedRateLimiter } from '@paygate/runtime';
