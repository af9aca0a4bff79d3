/**
 * The browser's one way to Paygate's REST API (checkout widget, seller dashboard; nothing but fetch,
 * AbortController, timers and crypto.getRandomValues): a request with a deadline that covers the body too,
 * failures read into an ApiError.
 */

export class ApiError extends Error {
  constructor(
    /** The answer's HTTP status; 0 when there was no answer (or none in time), or the browser's wallet failed. */
    readonly status: number,
    readonly code: string,
    message: string,
    /** The request field the API names, and the rule it broke, when the API names them. */
    readonly field?: string,
    readonly rule?: string,
    /** The API's id of the request (quote it to support). */
    readonly requestId?: string,
  ) {
    super(message);
  }
}

/** The error of a failed answer, from the API's one error shape (`{ error: {…} }`), or its status when there is none. */
function errorFrom(status: number, bodyText: string): ApiError {
  const fallback = `the server answered ${status}`;
  let error: Partial<Record<'code' | 'message' | 'field' | 'rule' | 'requestId', string>> | undefined;
  try {
    error = JSON.parse(bodyText)?.error;
  } catch {}
  if (typeof error?.code !== 'string') return new ApiError(status, `http_${status}`, fallback);
  return new ApiError(
    status,
    error.code,
    error.message ?? fallback,
    error.field,
    error.rule,
    error.requestId,
  );
}

/**
 * The answer's JSON (or text; undefined for 204), or an ApiError: status 0 with `timeout` when Paygate gave no
 * whole answer within the deadline, or `network_error` when it could not be reached; else, for a failed answer,
 * the API's code, message, field, rule and request id (`http_<status>` when the body is not the API's error).
 * `text`: the answer's text as it is (SKILL.md); `fetch`: another fetch (tests).
 */
export async function requestJson<T>(
  url: string,
  init: RequestInit,
  options: { timeoutMs: number; text?: boolean; fetch?: typeof fetch },
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
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}
