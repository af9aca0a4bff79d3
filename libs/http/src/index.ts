export {
  acceptedRequestId,
  createApp,
  errorHandler,
  errorResponse,
  isDatabaseUnavailable,
  notFoundHandler,
  requestIdFrom,
} from './app';
export { bearerToken, bearerTokenOf, constantTimeEqual, operatorAuth } from './auth';
export {
  addressBucket,
  clientAddress,
  parseTrustedProxies,
  type TrustedProxies,
  TrustedProxiesError,
} from './client-address';
export {
  badRequest,
  conflict,
  errorBody,
  HttpError,
  HttpReason,
  invalidJson,
  notFound,
} from './errors';
export {
  checkIdempotencyKey,
  fingerprintOf,
  type IdempotencyClaims,
  type IdempotencyStore,
  type IdempotentAnswer,
  type IdempotentRequest,
  idempotencyKeyOf,
  idempotentInTransaction,
  idempotentWithClaim,
  refuseOtherRequest,
  requestFingerprint,
  type StoredKey,
  sendIdempotentAnswer,
} from './idempotency';
export { rateLimitMigrations } from './migrations';
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
} from './openapi';
export {
  checkRateLimit,
  type RateDecision,
  type RateLimitTables,
  rateLimitMiddleware,
  rateLimitNowOrLater,
  SharedRateLimiter,
} from './rate-limit';
export {
  type AnyRoute,
  bareRoutesOf,
  defineRoute,
  guardRoute,
  mountRoutes,
  openApiRoute,
  routesOpenApi,
} from './routes';
export { findStoredTextViolation, MAX_JSON_DEPTH, STORED_TEXT_RULES } from './stored-text';
export { assertValid } from './validation';
