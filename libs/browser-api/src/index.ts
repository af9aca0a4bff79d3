/**
 * The browser's one way to Paygate's REST API (checkout widget, seller dashboard; nothing but fetch,
 * AbortController, timers and crypto.getRandomValues): a request with a deadline that covers the body too,
 * failures read into an ApiError.
 */

/** The API's error shape (the `error` of a failed answer's body). */
export interface ApiErrorBody {
  code: string;
  message: string;
  field?: string;
  rule?: string;
  requestId?: string;
}

export class ApiError extends Error {
  constructor(
    /** The answer's HTTP status; 0 when there was no answer (or none in time), or the browser's wallet failed. */
    readonly status: number,
    readonly code: string,
    message: string,
    /** The request field the API names, when it names one. */
    readonly field?: string,
    /** The rule that field broke, when the API names one. */
    readonly rule?: string,
    /** The API's id of the request (quote it to support). */
    readonly requestId?: string,
  ) {
    super(message);
  }
}

export interface RequestJsonOptions {
  /** The deadline for the whole answer, its body included. */
  timeoutMs: number;
  /** The answer's text as it is instead of its JSON (SKILL.md). */
  text?: boolean;
  /** Another fetch (tests); the page's own by default. */
  fetch?: typeof fetch;
}

/** The error of a failed answer, from the API's one error shape, or a plain description when there is none. */
function errorFrom(status: number, bodyText: string): ApiError {
  let error: Partial<ApiErrorBody> | undefined;
  try {
    error = (JSON.parse(bodyText) as { error?: Partial<ApiErrorBody> } | null)?.error;
  } catch {
    error = undefined;
  }
  const fallback = `the server answered ${status}`;
  if (typeof error?.code !== 'string') return new ApiError(status, `http_${status}`, fallback);
  const { message, field, rule, requestId } = error;
  return new ApiError(status, error.code, message ?? fallback, field, rule, requestId);
}

/**
 * The answer's JSON (or text; undefined for 204), or an ApiError: status 0 with `timeout` when Paygate gave no
 * whole answer within the deadline, or `network_error` when it could not be reached; else, for a failed answer,
 * the API's code, message, field, rule and request id (`http_<status>` when the body is not the API's error).
 */
export async function requestJson<T>(
  url: string,
  init: RequestInit,
  options: RequestJsonOptions,
): Promise<T> {
  // A controller and a timer rather than AbortSignal.timeout: the pay button also runs in older Safari (15).
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, options.timeoutMs);
  try {
    let response: Response;
    let bodyText: string;
    try {
      response = await (options.fetch ?? fetch)(url, { ...init, signal: controller.signal });
      bodyText = await response.text();
    } catch {
      throw timedOut
        ? new ApiError(0, 'timeout', 'Paygate did not answer in time. Check your connection and try again.')
        : new ApiError(
            0,
            'network_error',
            'Paygate could not be reached. Check your connection and try again.',
          );
    }
    if (!response.ok) throw errorFrom(response.status, bodyText);
    if (response.status === 204) return undefined as T;
    if (options.text) return bodyText as T;
    try {
      return JSON.parse(bodyText) as T;
    } catch {
      throw new ApiError(
        response.status,
        'invalid_response',
        `the server answered ${response.status} without JSON`,
      );
    }
  } finally {
    clearTimeout(timer);
  }
}

/** An Idempotency-Key for a creating request: a retried click or dialog sends the same one, and creates once. */
export function newIdempotencyKey(): string {
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}
