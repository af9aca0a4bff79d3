import { randomUUID } from 'node:crypto';
import type { Logger } from '@paygate/telemetry';
import express, { type ErrorRequestHandler, type Express as ExpressApp, type Request } from 'express';
import { type ErrorBody, HttpError } from './errors';

declare global {
  namespace Express {
    interface Request {
      requestId: string;
      rawBody?: Buffer;
    }
  }
}

export interface AppOptions {
  logger: Logger;
  /** Largest JSON body accepted; larger bodies get 413. */
  bodyLimit?: string;
  /** Keep the raw bytes of JSON bodies on req.rawBody (signature checks). */
  keepRawBody?: boolean;
}

/**
 * The express 5 app every service starts from: request ids, JSON bodies with a size limit,
 * one error body shape, and no stack trace ever sent to a client.
 */
export function createApp(options: AppOptions): ExpressApp {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', 'loopback');
  app.use((req, res, next) => {
    const incoming = req.header('x-request-id');
    req.requestId = incoming && /^[A-Za-z0-9._-]{1,128}$/.test(incoming) ? incoming : randomUUID();
    res.setHeader('x-request-id', req.requestId);
    next();
  });
  app.use(
    express.json({
      limit: options.bodyLimit ?? '256kb',
      type: ['application/json', 'application/*+json'],
      ...(options.keepRawBody
        ? {
            verify: (req: Request, _res: unknown, buffer: Buffer) => {
              req.rawBody = buffer;
            },
          }
        : {}),
    }),
  );
  return app;
}

/** Must be added last: maps every error to the shared JSON body. */
export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (error, req, res, _next) => {
    const requestId = req.requestId;
    let status = 500;
    let body: ErrorBody;
    if (error instanceof HttpError) {
      status = error.status;
      body = { error: { code: error.code, message: error.message, ...error.details, requestId } };
    } else if (error?.type === 'entity.parse.failed') {
      status = 400;
      body = {
        error: {
          code: 'invalid_json',
          message: 'body is not valid JSON',
          field: 'body',
          rule: 'must be JSON',
          requestId,
        },
      };
    } else if (error?.type === 'entity.too.large') {
      status = 413;
      body = {
        error: {
          code: 'body_too_large',
          message: 'body is larger than the limit',
          field: 'body',
          rule: 'too large',
          requestId,
        },
      };
    } else if (typeof error?.status === 'number' && error.status >= 400 && error.status < 500) {
      status = error.status;
      body = { error: { code: 'bad_request', message: String(error.message ?? 'bad request'), requestId } };
    } else {
      logger.error({ err: error, requestId, path: req.path }, 'unhandled error');
      body = { error: { code: 'internal_error', message: 'internal error', requestId } };
    }
    if (res.headersSent) return;
    res.status(status).json(body);
  };
}

export function notFoundHandler(): express.RequestHandler {
  return (req, _res, next) => next(new HttpError(404, 'not_found', `no route for ${req.method} ${req.path}`));
}
