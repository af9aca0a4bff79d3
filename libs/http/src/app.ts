import { randomUUID } from 'node:crypto';
import type { Logger } from '@paygate/telemetry';
import express, { type ErrorRequestHandler, type Express as ExpressApp, type Request } from 'express';
import { clientAddress, parseTrustedProxies, type TrustedProxies } from './client-address';
import { badRequest, type ErrorBody, errorBody, HttpError, HttpReason, invalidJson } from './errors';
import { assertStoredText } from './validation';

declare global {
  namespace Express {
    interface Request {
      requestId: string;
      rawBody?: Buffer;
    }
  }
}

const REQUEST_ID_PATTERN = /^[A-Za-z0-9._-]{1,128}$/;

/** The caller's X-Request-Id when it is a safe one (1-128 of [A-Za-z0-9._-]), else undefined. */
export function acceptedRequestId(incoming: string | string[] | undefined): string | undefined {
  return typeof incoming === 'string' && REQUEST_ID_PATTERN.test(incoming) ? incoming : undefined;
}

export function requestIdFrom(incoming: string | string[] | undefined): string {
  return acceptedRequestId(incoming) ?? randomUUID();
}

interface AppOptions {
  logger: Logger;
  /** Largest JSON body accepted; larger bodies get 413. */
  bodyLimit?: string;
  /** Keep the raw bytes of JSON bodies on req.rawBody (signature checks). */
  keepRawBody?: boolean;
  /** Whose X-Forwarded-For is believed (TRUSTED_PROXIES); loopback only when absent. */
  trustedProxies?: TrustedProxies;
}

/** The express 5 app every service starts from: request ids, JSON bodies with a size limit. */
export function createApp(options: AppOptions): ExpressApp {
  const app = express();
  app.disable('x-powered-by');
  const trusted = options.trustedProxies ?? parseTrustedProxies(undefined);
  // req.ip is clientAddress()'s (the right-most untrusted X-Forwarded-For hop), never express's own reading.
  app.set('trust proxy', (address: string) => trusted.has(address));
  Object.defineProperty(app.request, 'ip', {
    configurable: true,
    enumerable: true,
    get(this: Request) {
      return clientAddress(this, trusted);
    },
  });
  app.use((req, res, next) => {
    req.requestId = requestIdFrom(req.headers['x-request-id']);
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
  // Every parsed JSON body meets the stored-text rules before any route sees it, validated or not.
  app.use((req, _res, next) => {
    if (req.body !== undefined) assertStoredText(req.body, 'body');
    next();
  });
  return app;
}

/** Postgres refusing a value (class 22, or 54000: too large for an index): the input's fault. */
function isDatabaseDataError(error: unknown): error is { code: string; message: string } {
  const candidate = error as { code?: unknown; severity?: unknown } | null;
  return (
    typeof candidate?.code === 'string' &&
    typeof candidate.severity === 'string' &&
    (candidate.code.startsWith('22') || candidate.code === '54000')
  );
}

/**
 * Postgres away or not handing out a connection for now (connection errors, shutdowns, timeouts, a conflict left
 * after retries): a 503. Nothing of the transaction was kept, so a retry applies the write once.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  return someCause(error, isOneDatabaseUnavailable);
}

const UNAVAILABLE_SQLSTATES = new Set([
  '57P01',
  '57P02',
  '57P03',
  '53300',
  '55P03',
  '57014',
  '40P01',
  '40001',
]);
const UNREACHABLE_SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'ECONNABORTED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
]);

function isOneDatabaseUnavailable(error: unknown): boolean {
  const candidate = error as { code?: unknown; message?: unknown } | null;
  const code = typeof candidate?.code === 'string' ? candidate.code : '';
  if (code.startsWith('08') || UNAVAILABLE_SQLSTATES.has(code) || UNREACHABLE_SOCKET_CODES.has(code))
    return true;
  // node-postgres raises these as plain Errors with no code or class of their own: the text is all there is.
  const message = typeof candidate?.message === 'string' ? candidate.message : '';
  return /timeout exceeded when trying to connect|Connection terminated|connection is closed|connection error and is not queryable|Client was closed and is not queryable|Query read timeout/i.test(
    message,
  );
}

/** `error`, what it wraps (`cause`, a few levels) or one of an AggregateError's matches. */
function someCause(error: unknown, matches: (error: unknown) => boolean, depth = 0): boolean {
  if (error === null || error === undefined || depth > 4) return false;
  if (matches(error)) return true;
  const candidate = error as { cause?: unknown; errors?: unknown };
  if (Array.isArray(candidate.errors) && candidate.errors.some((e) => someCause(e, matches, depth + 1))) {
    return true;
  }
  return candidate.cause !== error && someCause(candidate.cause, matches, depth + 1);
}

/** NatsError codes of a connection away for now, or of a request unanswered (TIMEOUT, 408, 503). */
const NATS_UNAVAILABLE_CODES = new Set([
  'DISCONNECT',
  'CONNECTION_CLOSED',
  'CONNECTION_DRAINING',
  'CONNECTION_REFUSED',
  'CONNECTION_TIMEOUT',
  'TIMEOUT',
  '408',
  '503',
]);

/** A service needed over the bus did not answer (or failed 5xx), or NATS is away: a 503. Known by name. */
function isDependencyUnavailable(error: unknown): boolean {
  return someCause(error, (one) => {
    const { name, code } = one as { name?: unknown; code?: unknown };
    if (name === 'NatsError') return typeof code === 'string' && NATS_UNAVAILABLE_CODES.has(code);
    return (
      name === 'RpcUnavailableError' ||
      (name === 'RpcServiceError' && typeof code === 'number' && code >= 500)
    );
  });
}

type ErrorAnswer = { status: number; body: ErrorBody };

/** One kind of error and how it is answered; `heard` names which of errorResponse's callbacks hears of it. */
interface ErrorKind {
  matches(error: any): boolean;
  heard?: 'unexpected' | 'databaseRefusal';
  answer(error: any): HttpError;
}

const unavailable = (code: string, message: string) => () => new HttpError(503, code, message);

/** The kinds of error with their own answer, in order: the first that matches answers. */
const ERROR_KINDS: readonly ErrorKind[] = [
  { matches: (error) => error instanceof HttpError, answer: (error) => error },
  { matches: (error) => error?.type === 'entity.parse.failed', answer: invalidJson },
  {
    matches: (error) => error?.type === 'entity.too.large',
    answer: () =>
      new HttpError(413, HttpReason.BodyTooLarge, 'body is larger than the limit', {
        field: 'body',
        rule: 'too large',
      }),
  },
  {
    matches: isDatabaseDataError,
    heard: 'databaseRefusal',
    answer: () =>
      new HttpError(400, HttpReason.UnstorableValue, 'a value of the request cannot be stored', {
        rule: 'must be a value the database accepts',
      }),
  },
  {
    // Express could not decode a path value ("%zz", a cut UTF-8 sequence): bad input, named like any other.
    matches: (error) => error instanceof URIError && (error as { status?: number }).status === 400,
    answer: (error) => badRequest('path', 'must be valid percent-encoded UTF-8', String(error.message)),
  },
  {
    matches: isDatabaseUnavailable,
    heard: 'unexpected',
    answer: unavailable(HttpReason.DatabaseUnavailable, 'the database is unavailable; retry shortly'),
  },
  {
    matches: isDependencyUnavailable,
    heard: 'unexpected',
    answer: unavailable(
      HttpReason.DependencyUnavailable,
      'a service this request needs did not answer; retry shortly',
    ),
  },
  {
    // Another client error: express's or a library's 4xx.
    matches: (error) => typeof error?.status === 'number' && error.status >= 400 && error.status < 500,
    answer: (error) =>
      new HttpError(error.status, HttpReason.BadRequest, String(error.message ?? 'bad request')),
  },
];

/** An error's status and body; `onUnexpected` hears of server faults, `onDatabaseRefusal` of refused values. */
export function errorResponse(
  error: any,
  requestId: string,
  onUnexpected: (error: unknown) => void,
  onDatabaseRefusal?: (error: { code: string; message: string }) => void,
): ErrorAnswer {
  const kind = ERROR_KINDS.find((candidate) => candidate.matches(error));
  if (!kind || kind.heard === 'unexpected') onUnexpected(error);
  if (kind?.heard === 'databaseRefusal') onDatabaseRefusal?.(error);
  const answer = kind ? kind.answer(error) : new HttpError(500, HttpReason.InternalError, 'internal error');
  return { status: answer.status, body: errorBody(answer, requestId) };
}

/** Must be added last: maps every error to the shared JSON body. */
export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (error, req, res, _next) => {
    const requestId = req.requestId;
    const { status, body } = errorResponse(
      error,
      requestId,
      (err) => logger.error({ err, requestId, path: req.path }, 'unhandled error'),
      (refused) =>
        logger.warn(
          { sqlState: refused.code, dbMessage: refused.message, requestId, path: req.path },
          'database refused a value',
        ),
    );
    if (res.headersSent) return;
    if (status === 503) res.setHeader('Retry-After', '1');
    res.status(status).json(body);
  };
}

export function notFoundHandler(): express.RequestHandler {
  return (req, _res, next) =>
    next(new HttpError(404, HttpReason.RouteNotFound, `no route for ${req.method} ${req.path}`));
}
