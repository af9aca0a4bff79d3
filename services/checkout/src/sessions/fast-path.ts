import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ErrorBody } from '@paygate/http';
import { HttpError } from '@paygate/http';
import type { ServiceMetrics } from '@paygate/runtime';
import type { Logger } from '@paygate/telemetry';
import { CORS_HEADERS } from './cors';

/**
 * Session creation by the widget (POST with a publishable key and a JSON body) answered on the bare Node
 * request, ahead of express's middleware stack, the way gateway-proxy answers paid calls: it is the
 * service's hottest route, and express's router, body parser and response helpers cost more CPU than the
 * work itself. The answer is the express route's, byte for byte in body and status: the same
 * `createSession`, the same request id, CORS headers, error body and request metric. Anything else
 * (another key, another content type, a compressed or chunked or oversized body) goes to express.
 */

/** The same limit as the express JSON parser (@paygate/http). */
const BODY_LIMIT_BYTES = 256 * 1024;
const REQUEST_ID_PATTERN = /^[A-Za-z0-9._-]{1,128}$/;
const BEARER_PATTERN = /^Bearer\s+(\S+)$/i;
/** What express.json accepts without re-encoding; any other type or charset goes to express. */
const JSON_CONTENT_TYPE = /^application\/json\s*(;\s*charset=utf-8\s*)?$/i;

export interface CreateResult {
  snapshot: unknown;
  replayed: boolean;
}

export interface FastPathOptions {
  path: string;
  logger: Logger;
  metrics: ServiceMetrics;
  createSession(token: string, body: unknown, idempotencyKey: string | undefined): Promise<CreateResult>;
}

/**
 * The handler for the runtime's `fastPath` option: answers widget session creation on the bare request and
 * returns true, or returns false so express handles the request.
 */
export function createSessionFastPath(
  options: FastPathOptions,
): (req: IncomingMessage, res: ServerResponse) => boolean {
  const handle = createFastPathHandler(options);
  return (req, res) => {
    const token = fastPathToken(req, options.path);
    if (!token) return false;
    handle(req, res, token);
    return true;
  };
}

/** The publishable key when the request is one the fast path answers, else undefined. */
function fastPathToken(req: IncomingMessage, path: string): string | undefined {
  if (req.method !== 'POST') return undefined;
  const url = req.url;
  if (url !== path && !url?.startsWith(`${path}?`)) return undefined;
  const { headers } = req;
  const type = headers['content-type'];
  if (type === undefined || !JSON_CONTENT_TYPE.test(type)) return undefined;
  if (headers['content-encoding'] !== undefined) return undefined;
  const length = headers['content-length'];
  if (length === undefined || !(Number(length) <= BODY_LIMIT_BYTES)) return undefined;
  const authorization = headers.authorization;
  if (authorization === undefined) return undefined;
  const token = BEARER_PATTERN.exec(authorization.trim())?.[1];
  return token?.startsWith('pk_') ? token : undefined;
}

function createFastPathHandler(options: FastPathOptions) {
  const { createSession, logger, metrics, path } = options;
  const durationByStatus = new Map<number, { observe(seconds: number): void }>();
  const observe = (status: number, startedMs: number) => {
    let child = durationByStatus.get(status);
    if (!child) {
      child = metrics.httpDuration.labels({ method: 'POST', route: path, status: String(status) });
      durationByStatus.set(status, child);
    }
    child.observe((performance.now() - startedMs) / 1000);
  };

  const send = (res: ServerResponse, status: number, requestId: string, json: string, replayed = false) => {
    const headers: Record<string, string | number> = {
      ...CORS_HEADERS,
      'x-request-id': requestId,
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(json),
    };
    if (replayed) headers['Idempotent-Replayed'] = 'true';
    res.writeHead(status, headers);
    res.end(json);
  };

  const fail = (res: ServerResponse, requestId: string, error: unknown, startedMs: number) => {
    let status = 500;
    let body: ErrorBody;
    if (error instanceof HttpError) {
      status = error.status;
      body = { error: { code: error.code, message: error.message, ...error.details, requestId } };
    } else if (error instanceof SyntaxError) {
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
    } else {
      logger.error({ err: error, requestId, path }, 'unhandled error');
      body = { error: { code: 'internal_error', message: 'internal error', requestId } };
    }
    if (res.headersSent) return;
    send(res, status, requestId, JSON.stringify(body));
    observe(status, startedMs);
  };

  const answer = async (
    req: IncomingMessage,
    res: ServerResponse,
    token: string,
    raw: Buffer,
    started: number,
  ) => {
    const incoming = req.headers['x-request-id'];
    const requestId =
      typeof incoming === 'string' && REQUEST_ID_PATTERN.test(incoming) ? incoming : randomUUID();
    try {
      const body = parseJsonBody(raw);
      const idempotencyKey = req.headers['idempotency-key'];
      const { snapshot, replayed } = await createSession(
        token,
        body,
        typeof idempotencyKey === 'string' ? idempotencyKey : undefined,
      );
      const status = replayed ? 200 : 201;
      send(res, status, requestId, JSON.stringify(snapshot), replayed);
      observe(status, started);
    } catch (error) {
      fail(res, requestId, error, started);
    }
  };

  return (req: IncomingMessage, res: ServerResponse, token: string) => {
    const started = performance.now();
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      void answer(req, res, token, raw, started);
    });
  };
}

/** Like express.json (strict): an empty body is {}, anything but an object or array is invalid JSON. */
function parseJsonBody(raw: Buffer): unknown {
  const text = raw.toString('utf8');
  const first = /\S/.exec(text)?.[0];
  if (first === undefined) return {};
  if (first !== '{' && first !== '[') throw new SyntaxError('body is not a JSON object or array');
  return JSON.parse(text);
}
