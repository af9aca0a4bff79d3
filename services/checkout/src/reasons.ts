/**
 * The refusals of session creation and the widget's routes, by their machine-readable code (`error.code`), each
 * named once here. The operator routes answer the ledger's own refusals (matching/operator.ts).
 */
export const CheckoutReason = {
  // The key (401).
  MissingKey: 'missing_key',
  InvalidKey: 'invalid_key',
  InvalidPublishableKey: 'invalid_publishable_key',
  UnknownPublishableKey: 'unknown_publishable_key',

  // What the session is for (400, 404, 409).
  InvalidRequest: 'invalid_request',
  SkillNotFound: 'skill_not_found',
  SkillNotActive: 'skill_not_active',
  EndpointNotFound: 'endpoint_not_found',
  EndpointNotPriced: 'endpoint_not_priced',

  // Limits and retries (429, 503, with Retry-After).
  RateLimited: 'rate_limited',
  TooManyOpenSessions: 'too_many_open_sessions',
  SessionNotCreated: 'session_not_created',
} as const;

export type CheckoutReason = (typeof CheckoutReason)[keyof typeof CheckoutReason];
