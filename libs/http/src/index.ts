export {
  acceptedRequestId,
  createApp,
  errorHandler,
  errorResponse,
  isDatabaseUnavailable,
  isDependencyUnavailable,
  notFoundHandler,
  requestIdFrom,
} from './app';
export { bearerToken, bearerTokenOf, constantTimeEqual, operatorAuth } from './auth';
export {
  addressBucket,
  clientAddress,
  DEFAULT_TRUSTED_PROXIES,
  normalizeAddress,
  parseTrustedProxies,
  type TrustedProxies,
  TrustedProxiesError,
} from './client-address';
export { badRequest, conflict, type ErrorBody, HttpError, invalidJson, notFound } from './errors';
export {
  type ClaimTimings,
  canonicalJson,
  checkIdempotencyKey,
  DEFAULT_CLAIM_TIMINGS,
  fingerprintOf,
  IDEMPOTENCY_KEY_HEADER,
  IDEMPOTENCY_KEY_PATTERN,
  IDEMPOTENCY_KEY_RULE,
  IDEMPOTENT_REPLAYED_HEADER,
  type IdempotencyClaims,
  type IdempotencyStore,
  type IdempotentAnswer,
  type IdempotentRequest,
  idempotencyKeyOf,
  idempotencyKeyReused,
  idempotentInTransaction,
  idempotentWithClaim,
  type RequestIdentity,
  refuseOtherRequest,
  replayOrRefuse,
  requestFingerprint,
  type StoredKey,
  sendIdempotentAnswer,
} from './idempotency';
export {
  ErrorBodySchema,
  errorResponses,
  idempotencyKeyParameter,
  jsonRequestBody,
  jsonResponse,
  openApiDocument,
  plainSchema,
  schemaParameters,
  securitySchemes,
  serveOpenApi,
} from './openapi';
export {
  checkRateLimit,
  type RateDecision,
  type RateLimiterOptions,
  rateLimited,
  rateLimitMiddleware,
  rateLimitNowOrLater,
  SharedRateLimiter,
  setRateLimitHeaders,
  windowName,
} from './rate-limit';
export {
  type AnyRoute,
  type BareHandler,
  type BareServing,
  bareRoutesOf,
  defineRoute,
  guardRoute,
  mountRoutes,
  openApiRoute,
  routesOpenApi,
  routesOpenApiPaths,
} from './routes';
export { findStoredTextViolation, MAX_JSON_DEPTH, STORED_TEXT_RULES } from './stored-text';
export { assertStoredText, assertValid } from './validation';
