import type { NextFunction, Response } from 'express';
import { type PaygateApi, PaygateUnavailableError } from './paygate-api';

/** The codes the middleware answers itself; a refusal Paygate decided keeps its own. */
export const MIDDLEWARE_REASONS = {
  /** 429: Paygate is limiting this seller's verifications; Retry-After and `retryAfterSeconds` say when to retry. */
  rateLimited: 'rate_limited',
  /** 500: Paygate could not be reached within the timeout, or answered 5xx. */
  paygateUnavailable: 'paygate_unavailable',
} as const;

/** Paygate's error envelope: one shape for a buyer from Paygate and from a seller behind it (402s aside). */
export function sendError(
  res: Response,
  status: number,
  code: string,
  message: string,
  details: Record<string, unknown> = {},
): void {
  res.status(status).json({ error: { code, message, ...details } });
}

/** Paygate could not be reached (or answered 5xx). */
export function answerUnavailable(
  res: Response,
  message = 'Paygate could not be reached; retry shortly',
): void {
  sendError(res, 500, MIDDLEWARE_REASONS.paygateUnavailable, message);
}

/** The error of a middleware's Paygate call: unreachable → the 500, anything else to express. */
export function answerFailure(error: unknown, res: Response, next: NextFunction): void {
  if (error instanceof PaygateUnavailableError) answerUnavailable(res);
  else next(error);
}

/** Paygate answered 429 to this seller's request: so does the middleware, with its Retry-After (else 60 s). */
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

/** A seller call's JSON answer; a 429 is answered here (undefined), any other failure is PaygateUnavailableError. */
export async function postToPaygate<T>(
  api: PaygateApi,
  path: string,
  body: unknown,
  res: Response,
): Promise<T | undefined> {
  const answer = await api.post(path, body);
  if (answer.status === 429) {
    answerRateLimited(res, answer);
    return undefined;
  }
  if (!answer.ok) throw new PaygateUnavailableError(`Paygate answered ${answer.status} to POST ${path}`);
  return (await answer.json()) as T;
}
