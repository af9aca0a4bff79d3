/**
 * The widget's one way to Paygate's REST API (checkout sessions, transaction lookup, refund requests): a JSON
 * request with a deadline that covers the body too, and the API's one error shape read into an ApiError.
 */

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** The request field the API names, when it names one. */
    readonly field?: string,
  ) {
    super(message);
  }
}

/**
 * The answer's JSON, or an ApiError: status 0 and `network_error` when Paygate gave no answer in time, else the
 * API's code, message and field (`http_error` when the body is not the API's error or not JSON at all).
 */
export async function requestJson<T>(url: string, init: RequestInit, timeoutMs: number): Promise<T> {
  // A controller and a timer rather than AbortSignal.timeout: the pay button also runs in older Safari (15).
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), timeoutMs);
  try {
    let response: Response;
    try {
      response = await fetch(url, { ...init, signal: controller.signal });
    } catch (error) {
      throw new ApiError(0, 'network_error', `cannot reach Paygate: ${(error as Error).message}`);
    }
    const body = (await response.json().catch(() => null)) as
      | (T & { error?: { code?: string; message?: string; field?: string } })
      | null;
    if (!response.ok || !body || body.error) {
      throw new ApiError(
        response.status,
        body?.error?.code ?? 'http_error',
        body?.error?.message ?? `request failed with status ${response.status}`,
        body?.error?.field,
      );
    }
    return body;
  } finally {
    clearTimeout(timer);
  }
}
