/** One JSON error body shape for every service: { error: { code, message, field?, rule?, requestId } }. */
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
  new HttpError(400, 'invalid_request', message ?? `${field} ${rule}`, { field, rule });
export const notFound = (what: string) => new HttpError(404, 'not_found', `${what} not found`);
/**
 * A body that is not a JSON object or array: broken JSON, or a scalar such as `null` or `"text"` (express.json's strict
 * mode refuses both). The message names the rule, which holds for both (`null` is valid JSON).
 */
export const invalidJson = () =>
  new HttpError(400, 'invalid_json', 'body must be a JSON object or array', {
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
