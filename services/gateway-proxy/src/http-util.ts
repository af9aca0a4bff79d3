import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { acceptedRequestId } from '@paygate/http';

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.setHeader('content-length', Buffer.byteLength(text));
  res.end(text);
}

// A random per-process prefix and a counter: unique like a UUID without drawing random bytes per request.
const idPrefix = randomUUID();
let idCounter = 0;

/** The caller's request id when acceptable (the rule every service applies), else a new one. */
export function requestIdOf(req: IncomingMessage): string {
  const accepted = acceptedRequestId(req.headers['x-request-id']);
  if (accepted !== undefined) return accepted;
  idCounter = (idCounter + 1) % Number.MAX_SAFE_INTEGER;
  return `${idPrefix}-${idCounter.toString(36)}`;
}
