import type { IncomingMessage, ServerResponse } from 'node:http';
import { bearerTokenOf, errorResponse, invalidJson, requestIdFrom } from '@paygate/http';
import type { ServiceMetrics } from '@paygate/runtime';
import type { Logger } from '@paygate/telemetry';
import { RetryLaterError } from '../errors';
import { CORS_HEADERS } from './cors';
import type { sessionCreator } from './create-input';

// The widget's session creation on the bare Node request (the hottest route; express costs more than the work),
// answered byte for byte like the express route. Anything unusual goes to express.

/** The same limit as the express JSON parser (@paygate/http). */
const BODY_LIMIT_BYTES = 256 * 1024;
/** What express.json accepts without re-encoding; any other type or charset goes to express. */
const JSON_CONTENT_TYPE = /^application\/json\s*(;\s*charset=utf-8\s*)?$/i;

/** How a session creation is answered, by either transport: decided once (create-input.ts `sessionCreator`). */
export interface CreatedAnswer {
  status: number;
  body: unknown;
  headers: Readonly<Record<string, string>>;
}

interface FastPathOptions {
  /** The create route's method and path, as it declares them (routes.ts). */
  method: string;
  path: string;
  logger: Logger;
  metrics: ServiceMetrics;
  /** The client address (libs/http's clientAddress with the service's TRUSTED_PROXIES), as express's req.ip. */
  clientAddressOf(req: IncomingMessage): string;
  createSession: ReturnType<typeof sessionCreator>;
}

/**
 * The create route's bare handler (`bare` in defineRoute): answers widget session creation on the bare request and
 * returns true, or returns false so express handles the request.
 */
export function createSessionFastPath(
  options: FastPathOptions,
): (req: IncomingMessage, res: ServerResponse) => boolean {
  const { createSession, logger, metrics, path } = options;
  const method = options.method.toUpperCase();
  const observe = durationObserver(metrics, method, path);

  const answer = async (
    req: IncomingMessage,
    res: ServerResponse,
    token: string,
    raw: Buffer,
    started: number,
  ) => {
    const requestId = requestIdFrom(req.headers['x-request-id']);
    let status: number;
    try {
      const idempotencyKey = req.headers['idempotency-key'];
      const created = await createSession(
        token,
        parseJsonBody(raw),
        typeof idempotencyKey === 'string' ? idempotencyKey : undefined,
        options.clientAddressOf(req),
      );
      status = created.status;
      send(res, status, requestId, JSON.stringify(created.body), created.headers);
    } catch (error) {
      const failed = errorResponse(
        error,
        requestId,
        (err) => logger.error({ err, requestId, path }, 'unhandled error'),
        (refused) => logger.warn({ sqlState: refused.code, requestId, path }, 'database refused a value'),
      );
      if (res.headersSent) return;
      status = failed.status;
      const retry =
        error instanceof RetryLaterError ? { 'retry-after': String(error.retryAfterSeconds) } : undefined;
      send(res, status, requestId, JSON.stringify(failed.body), retry);
    }
    observe(status, started);
  };

  return (req, res) => {
    const token = fastPathToken(req, method, path);
    if (!token) return false;
    const started = performance.now();
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      void answer(req, res, token, raw, started);
    });
    return true;
  };
}

/** The publishable key when the request is one the fast path answers, else undefined. */
function fastPathToken(req: IncomingMessage, method: string, path: string): string | undefined {
  if (req.method !== method) return undefined;
  const url = req.url;
  if (url !== path && !url?.startsWith(`${path}?`)) return undefined;
  const { headers } = req;
  const type = headers['content-type'];
  if (type === undefined || !JSON_CONTENT_TYPE.test(type)) return undefined;
  if (headers['content-encoding'] !== undefined) return undefined;
  const length = headers['content-length'];
  if (length === undefined || !(Number(length) <= BODY_LIMIT_BYTES)) return undefined;
  const token = bearerTokenOf(headers.authorization);
  return token?.startsWith('pk_') ? token : undefined;
}

/** The request metric of the route (method, path), its child per status made once. */
function durationObserver(metrics: ServiceMetrics, method: string, path: string) {
  const durationByStatus = new Map<number, { observe(seconds: number): void }>();
  return (status: number, startedMs: number) => {
    let child = durationByStatus.get(status);
    if (!child) {
      child = metrics.httpDuration.labels({ method, route: path, status: String(status) });
      durationByStatus.set(status, child);
    }
    child.observe((performance.now() - startedMs) / 1000);
  };
}

/** Writes a JSON answer with the express route's headers (CORS, request id, type, length) plus any extra. */
function send(
  res: ServerResponse,
  status: number,
  requestId: string,
  json: string,
  extraHeaders: Readonly<Record<string, string>> = {},
) {
  res.writeHead(status, {
    ...CORS_HEADERS,
    'x-request-id': requestId,
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(json),
    ...extraHeaders,
  });
  res.end(json);
}

/** Like express.json (strict): an empty body is {}, anything but an object or array is invalid JSON. */
function parseJsonBody(raw: Buffer): unknown {
  const text = raw.toString('utf8');
  const first = /\S/.exec(text)?.[0];
  if (first === undefined) return {};
  if (first !== '{' && first !== '[') throw invalidJson();
  try {
    return JSON.parse(text);
  } catch {
    throw invalidJson();
  }
}
