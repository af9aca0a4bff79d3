/** The codes libs/http answers itself, on every service (docs/api.md, "Errors"); a service's own are its own. */
export const HttpReason = {
  /** 400: a value breaks a rule of its schema or of the text rules; `field` and `rule` name which. */
  InvalidRequest: 'invalid_request',
  /** 400: the body is not a JSON object or array. */
  InvalidJson: 'invalid_json',
  /** 400: a value passed every rule of the request and Postgres still refused it. */
  UnstorableValue: 'unstorable_value',
  /** 4xx: another client error raised by express or a library (its own status). */
  BadRequest: 'bad_request',
  /** 401: an operator route without the operator token. */
  Unauthorized: 'unauthorized',
  /** 404: the thing a route names does not exist. */
  NotFound: 'not_found',
  /** 404: no route serves this method and path. */
  RouteNotFound: 'route_not_found',
  /** 409: the Idempotency-Key was used with another request. */
  IdempotencyKeyReused: 'idempotency_key_reused',
  /** 409: the first request under this Idempotency-Key is still running. */
  IdempotencyRequestInProgress: 'idempotency_request_in_progress',
  /** 413: the body is over the service's limit. */
  BodyTooLarge: 'body_too_large',
  /** 429, with Retry-After, `limit` and `retryAfterSeconds`. */
  RateLimited: 'rate_limited',
  /** 503, with Retry-After: Postgres is away or refused the transaction for now; nothing of it was kept. */
  DatabaseUnavailable: 'database_unavailable',
  /** 503, with Retry-After: a service this request needs over the bus, or NATS itself, did not answer. */
  DependencyUnavailable: 'dependency_unavailable',
  /** 500: a fault of the server, logged with the request id; never a stack trace. */
  InternalError: 'internal_error',
} as const;

/** One JSON error body for every service: { error: { code, message, field?, rule?, …, requestId } }. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: { field?: string; rule?: string; [key: string]: unknown } = {},
  ) {
    super(message);
    this.name = 'HttpError';
  }
}

export const badRequest = (field: string, rule: string, message?: string) =>
  new HttpError(400, HttpReason.InvalidRequest, message ?? `${field} ${rule}`, { field, rule });
export const notFound = (what: string) => new HttpError(404, HttpReason.NotFound, `${what} not found`);
/** A body that is not a JSON object or array: broken JSON, or a scalar that express.json's strict mode refuses. */
export const invalidJson = () =>
  new HttpError(400, HttpReason.InvalidJson, 'body must be a JSON object or array', {
    field: 'body',
    rule: 'must be a JSON object or array',
  });
export const conflict = (code: string, message: string) => new HttpError(409, code, message);

export interface ErrorBody {
  error: {
    code: string;
    message: string;
    field?: string;
    rule?: string;
    requestId?: string;
    [key: string]: unknown;
  };
}

/** The body of `error` as every service answers it: the one place an error envelope is written. */
export function errorBody(error: HttpError, requestId?: string): ErrorBody {
  return {
    error: {
      code: error.code,
      message: error.message,
      ...error.details,
      ...(requestId ? { requestId } : {}),
    },
  };
}
