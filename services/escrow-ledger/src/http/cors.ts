import type { ErrorRequestHandler, NextFunction, Request, Response } from 'express';

/**
 * The buyer's routes (the widget's transaction lookup, refund requests signed by a wallet, no key) are readable
 * from any origin, like checkout's session routes; seller and operator routes stay without CORS.
 */
const PUBLIC_PATH = /^\/api\/v1\/(transactions\/lookup|refund-requests(\/[^/]+)?)$/;

const HEADERS: ReadonlyArray<[string, string]> = [
  ['Access-Control-Allow-Origin', '*'],
  ['Access-Control-Allow-Methods', 'GET, POST, OPTIONS'],
  ['Access-Control-Allow-Headers', 'Content-Type'],
  ['Access-Control-Expose-Headers', 'X-Request-Id'],
  ['Access-Control-Max-Age', '600'],
];

export function publicCors(req: Request, res: Response, next: NextFunction) {
  if (!PUBLIC_PATH.test(req.path)) return next();
  for (const [name, value] of HEADERS) res.setHeader(name, value);
  if (req.method === 'OPTIONS') {
    res.status(204).end();
    return;
  }
  next();
}

/** The same headers on an error raised before the routes (the JSON body parser's 400/413). */
export const publicCorsOnError: ErrorRequestHandler = (error, req, res, next) => {
  if (PUBLIC_PATH.test(req.path)) for (const [name, value] of HEADERS) res.setHeader(name, value);
  next(error);
};
