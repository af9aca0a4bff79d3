import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

/** Writes a JSON answer on a bare node response (express responses are node responses too). */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.setHeader('content-length', Buffer.byteLength(text));
  res.end(text);
}

const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;
// A random per-process prefix and a counter: unique like a UUID without drawing random bytes per request.
const idPrefix = randomUUID();
let idCounter = 0;

export function requestIdOf(req: IncomingMessage): string {
  const incoming = req.headers['x-request-id'];
  if (typeof incoming === 'string' && REQUEST_ID.test(incoming)) return incoming;
  idCounter = (idCounter + 1) % Number.MAX_SAFE_INTEGER;
  return `${idPrefix}-${idCounter.toString(36)}`;
}

const LOOPBACK = /^(127\.|::1$|::ffff:127\.)/;

/** The client address; behind a proxy on loopback (the edge), the last X-Forwarded-For hop (as express's 'trust proxy loopback'). */
export function clientIpOf(req: IncomingMessage): string {
  const remote = req.socket.remoteAddress ?? '';
  const forwarded = req.headers['x-forwarded-for'];
  if (LOOPBACK.test(remote) && typeof forwarded === 'string' && forwarded.length > 0) {
    const hops = forwarded
      .split(',')
      .map((h) => h.trim())
      .filter(Boolean);
    return hops.at(-1) ?? remote;
  }
  return remote;
}
