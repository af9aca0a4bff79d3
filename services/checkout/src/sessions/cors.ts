import type { ErrorRequestHandler, NextFunction, Request, Response } from 'express';

/** The widget runs on sellers' own sites: these routes answer any origin (no cookies are involved). */
export const CORS_HEADERS: Readonly<Record<string, string>> = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Allow-Methods': 'GET, POST, OPTIONS',
  'Access-Control-Allow-Headers': 'Authorization, Content-Type, Idempotency-Key',
  'Access-Control-Expose-Headers': 'Idempotent-Replayed, X-Request-Id, Retry-After',
  'Access-Control-Max-Age': '600',
};

const CORS_ENTRIES = Object.entries(CORS_HEADERS);

export function cors(req: Request, res: Response, next: NextFunction) {
  for (const [name, value] of CORS_ENTRIES) res.setHeader(name, value);
  if (req.method === 'OPTIONS') {
    res.status(204).end();
    return;
  }
  next();
}

/**
 * The same headers on an error raised before the routes (the JSON body parser's 400/413), so a page can read
 * those answers too, as it reads the fast path's.
 */
export const corsOnError: ErrorRequestHandler = (error, _req, res, next) => {
  for (const [name, value] of CORS_ENTRIES) res.setHeader(name, value);
  next(error);
};
