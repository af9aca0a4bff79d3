import type { Duplex } from 'node:stream';
import type { RawData, WebSocket } from 'ws';
import type { CheckoutSessionSnapshot } from '../sessions/repository';
import type { ClientMessage, ErrorCode, ServerMessage } from './protocol';

const MESSAGES_PER_WINDOW = 60;
const RATE_WINDOW_MS = 10_000;

/** One open socket of the live channel and what it listens to. */
export interface Client {
  socket: WebSocket;
  /** The client address (TRUSTED_PROXIES' rule): its open sockets are bounded. */
  address: string;
  /** Per session: the updatedAt (ms) and JSON of the last snapshot sent, so nothing older or equal goes out. */
  sessions: Map<string, { updatedAtMs: number; json: string }>;
  alive: boolean;
  idleSinceMs: number | null;
  windowStartMs: number;
  windowCount: number;
  /** Set once `authenticate` succeeded: the socket hears this seller's changes and nobody else's. */
  seller?: { sellerId: string; token: string; verifiedAtMs: number; verifying: boolean };
}

export function newClient(socket: WebSocket, address: string, now: number): Client {
  return {
    socket,
    address,
    sessions: new Map(),
    alive: true,
    idleSinceMs: now,
    windowStartMs: now,
    windowCount: 0,
  };
}

export function send(client: Client, message: ServerMessage): void {
  if (client.socket.readyState === client.socket.OPEN) client.socket.send(JSON.stringify(message));
}

export function sendError(client: Client, code: ErrorCode, message: string, sessionId?: string): void {
  send(client, { type: 'error', code, message, ...(sessionId ? { sessionId } : {}) });
}

/** Sends a snapshot of a session the client listens to, unless it is older than, or the same as, the last sent. */
export function sendSnapshot(client: Client, snapshot: CheckoutSessionSnapshot): void {
  const last = client.sessions.get(snapshot.sessionId);
  if (!last) return;
  const updatedAtMs = Date.parse(snapshot.updatedAt);
  const json = JSON.stringify(snapshot);
  if (updatedAtMs < last.updatedAtMs || json === last.json) return; // older than, or the same as, what was sent
  client.sessions.set(snapshot.sessionId, { updatedAtMs, json });
  send(client, { type: 'session', session: snapshot });
}

/** Counts a message in the rate window; past MESSAGES_PER_WINDOW the socket is told and closed (false). */
export function withinRateLimit(client: Client, now: number): boolean {
  if (now - client.windowStartMs > RATE_WINDOW_MS) {
    client.windowStartMs = now;
    client.windowCount = 0;
  }
  if (++client.windowCount <= MESSAGES_PER_WINDOW) return true;
  sendError(client, 'rate_limited', `at most ${MESSAGES_PER_WINDOW} messages per ${RATE_WINDOW_MS / 1000} s`);
  client.socket.close(1008, 'rate limited');
  return false;
}

/** A client's message as a JSON object, or undefined (the client is told) for anything else. */
export function parseClientMessage(
  client: Client,
  data: RawData,
  isBinary: boolean,
): ClientMessage | undefined {
  let message: unknown;
  try {
    message = isBinary ? undefined : JSON.parse(data.toString());
  } catch {}
  if (typeof message === 'object' && message !== null) return message as ClientMessage;
  sendError(client, 'invalid_message', 'messages are JSON objects: {"type":"subscribe","sessionId":"..."}');
  return undefined;
}

/** Answers an upgrade request that is not accepted with a plain HTTP response, then closes the socket. */
export function rejectUpgrade(
  socket: Duplex,
  status: number,
  text: string,
  options: { retryAfterSeconds?: number; body?: unknown } = {},
): void {
  const body = options.body === undefined ? '' : JSON.stringify(options.body);
  const headers = [
    `HTTP/1.1 ${status} ${text}`,
    'Connection: close',
    ...(options.retryAfterSeconds ? [`Retry-After: ${options.retryAfterSeconds}`] : []),
    ...(body ? ['Content-Type: application/json; charset=utf-8'] : []),
    `Content-Length: ${Buffer.byteLength(body)}`,
  ];
  socket.end(`${headers.join('\r\n')}\r\n\r\n${body}`);
}
