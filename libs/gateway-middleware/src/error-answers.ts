import type { Response } from 'express';
import { MIDDLEWARE_REASONS } from './reasons';

/**
 * Answers with the envelope of every non-2xx Paygate answer, `{ error: { code, message, ...details } }` (docs/api.md,
 * "Errors": libs/http's errorBody), so a buyer reads one shape from Paygate and from a seller behind this middleware.
 * The 402s keep the bodies docs/api.md fixes for them. Written here because the published middleware ships none of
 * libs/http (a service's express app, database and logging code).
 */
export function sendError(
  res: Response,
  status: number,
  code: string,
  message: string,
  details: Record<string, unknown> = {},
): void {
  res.status(status).json({ error: { code, message, ...details } });
}

/** Paygate could not be reached (or answered 5xx): the 500 docs/api.md gives the middleware. */
export function answerUnavailable(
  res: Response,
  message = 'Paygate could not be reached; retry shortly',
): void {
  sendError(res, 500, MIDDLEWARE_REASONS.paygateUnavailable, message);
}

/**
 * Paygate answered 429 to this seller's request: the buyer gets a 429 with the same Retry-After (60 s when Paygate
 * named none), and `code` (Paygate's own when it gave one).
 */
export function answerRateLimited(
  res: Response,
  answer: globalThis.Response,
  code: string = MIDDLEWARE_REASONS.rateLimited,
  message = 'Paygate is limiting payment checks for this seller; retry after Retry-After seconds',
): void {
  const seconds = Number(answer.headers.get('retry-after'));
  const retryAfterSeconds = Number.isInteger(seconds) && seconds > 0 ? seconds : 60;
  res.setHeader('Retry-After', String(retryAfterSeconds));
  sendError(res, 429, code, message, { retryAfterSeconds });
}
