import { createHash } from 'node:crypto';
import http, {
  type IncomingHttpHeaders,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type ServerResponse,
} from 'node:http';
import https from 'node:https';
import { EMPTY_BODY_SHA256 } from '@paygate/agent-client';
import type { SellerHttpAgents } from '@paygate/net';
import type { RequestSigner } from './signing';

/** Never forwarded to a seller: hop-by-hop headers, the payment proof, tickets and any credentials. */
const DROPPED_REQUEST_HEADERS = new Set([
  'host',
  'connection',
  'keep-alive',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'content-length',
  'x-402-payment',
  'payment',
  // x402's payment headers: an authorization is the buyer's money, never the seller's to see or replay.
  'payment-signature',
  'x-payment',
  'x-402-ticket',
  'authorization',
  'cookie',
  'x-forwarded-for',
  'x-forwarded-host',
  'x-forwarded-proto',
  'x-real-ip',
  // Only the gateway signs (set below on every forward); a buyer's value never reaches the seller.
  'x-paygate-signature',
]);
const DROPPED_RESPONSE_HEADERS = new Set([
  // Only Paygate states what was paid: a seller's response cannot set x402's settlement headers.
  'payment-response',
  'x-payment-response',
  'payment-required',
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

export interface ForwardTarget {
  clientIp: string;
  /** Raw bytes of a body already read (express.json); otherwise the request stream is read here. */
  rawBody?: Buffer;
  /** The seller's URL for this call: apiBaseUrl + endpoint path + query, as request options. */
  url: { protocol: string; hostname: string; port: string; path: string };
  /** Extra headers telling the seller who paid. */
  extraHeaders: Readonly<Record<string, string>>;
  /** The seller's forwarding key (ForwardingKeys); null: the request is signed with ES256. */
  forwardingKey: Buffer | null;
}

export type ForwardResult =
  | {
      kind: 'answered';
      status: number;
      /** Streams the seller's answer to the buyer, with extra response headers (the receipt). */
      relay(extraHeaders: Readonly<Record<string, string>>): void;
    }
  | { kind: 'failed'; reason: ForwardFailureReason; message: string };

/**
 * Why nothing came back: the seller timed out or was unreachable, or the buyer's body was over the limit or
 * never arrived whole (the seller saw nothing then).
 */
export type ForwardFailureReason = 'timeout' | 'unreachable' | 'body_too_large' | 'body_incomplete';

export interface ForwardOptions {
  /** Longest wait for the seller's response headers (and for the buyer's body to arrive). */
  timeoutMs: number;
  /** Signs every forwarded request (X-Paygate-Signature over method, path, body hash and payment). */
  signer: RequestSigner;
  /** Largest body forwarded: the body is read whole to hash it before the seller sees a byte. */
  maxBodyBytes: number;
  /** Connection pools to sellers (sellerHttpAgents): in production, public addresses only, checked at connect. */
  agents: SellerHttpAgents;
}

export const FORWARD_AGENT_OPTIONS = { keepAlive: true, maxSockets: 256 } as const;

export function safeRequestHeaders(incoming: IncomingHttpHeaders): OutgoingHttpHeaders {
  const headers: OutgoingHttpHeaders = {};
  for (const name in incoming) {
    const value = incoming[name];
    if (value === undefined || DROPPED_REQUEST_HEADERS.has(name)) continue;
    headers[name] = value;
  }
  return headers;
}

/** Streams the seller's answer to the buyer: one writeHead (safe upstream headers + extra ones), then the body. */
function relayUpstream(
  upstreamRes: IncomingMessage,
  res: ServerResponse,
  status: number,
  extraHeaders: Readonly<Record<string, string>>,
): void {
  const headers: OutgoingHttpHeaders = {};
  const answered = upstreamRes.headers;
  for (const name in answered) {
    const value = answered[name];
    if (value !== undefined && !DROPPED_RESPONSE_HEADERS.has(name)) headers[name] = value;
  }
  for (const name in extraHeaders) headers[name] = extraHeaders[name];
  res.writeHead(status, headers);
  upstreamRes.on('error', () => res.destroy());
  upstreamRes.pipe(res);
}

/**
 * Sends the buyer's request to the seller, signed. Calls `done` once: when the seller's response headers
 * arrived (the caller then decides, by status, what the payment becomes, and relays the body as a stream), or
 * with a failure on a connection error, when no response headers came within `timeoutMs`, or when the buyer's
 * body is over `maxBodyBytes` or did not arrive within `timeoutMs`. No promise: the hot path of a cached
 * subscription (a GET, no body) stays synchronous up to the seller's answer.
 */
export function forwardRequestThen(
  req: IncomingMessage,
  res: ServerResponse,
  target: ForwardTarget,
  options: ForwardOptions,
  done: (result: ForwardResult) => void,
): void {
  // express.json may have consumed a JSON body; its raw bytes were kept, so send them as they came.
  if (target.rawBody) sendUpstream(req, res, target, options, target.rawBody, done);
  else if (!hasRequestBody(req)) sendUpstream(req, res, target, options, undefined, done);
  else
    readBody(req, options, (body) => {
      if (Buffer.isBuffer(body)) sendUpstream(req, res, target, options, body, done);
      else done(body);
    });
}

function hasRequestBody(req: IncomingMessage): boolean {
  if (req.method === 'GET' || req.method === 'HEAD' || req.readableEnded) return false;
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

type BodyFailure = Extract<ForwardResult, { kind: 'failed' }>;

/**
 * The buyer's body, whole (its hash is signed before the seller sees a byte), bounded by `maxBodyBytes` and
 * `timeoutMs`. Past the bound the rest is drained and dropped, so the buyer still gets an answer.
 */
function readBody(
  req: IncomingMessage,
  options: ForwardOptions,
  then: (body: Buffer | BodyFailure) => void,
): void {
  const max = options.maxBodyBytes;
  const tooLarge: BodyFailure = {
    kind: 'failed',
    reason: 'body_too_large',
    message: `the request body must be at most ${max} bytes`,
  };
  if (Number(req.headers['content-length'] ?? 0) > max) {
    req.resume();
    then(tooLarge);
    return;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  let settled = false;
  const finish = (result: Buffer | BodyFailure) => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    req.off('data', onData);
    req.off('end', onEnd);
    req.off('error', onError);
    req.off('aborted', onError);
    if (!Buffer.isBuffer(result)) req.resume();
    then(result);
  };
  const onData = (chunk: Buffer) => {
    size += chunk.length;
    if (size > max) finish(tooLarge);
    else chunks.push(chunk);
  };
  const onEnd = () => finish(Buffer.concat(chunks, size));
  const onError = () =>
    finish({ kind: 'failed', reason: 'body_incomplete', message: 'the request body did not arrive whole' });
  const timer = setTimeout(
    () =>
      finish({
        kind: 'failed',
        reason: 'body_incomplete',
        message: `the request body did not arrive within ${options.timeoutMs} ms`,
      }),
    options.timeoutMs,
  );
  req.on('data', onData);
  req.once('end', onEnd);
  req.once('error', onError);
  req.once('aborted', onError);
}

function sendUpstream(
  req: IncomingMessage,
  res: ServerResponse,
  target: ForwardTarget,
  options: ForwardOptions,
  body: Buffer | undefined,
  done: (result: ForwardResult) => void,
): void {
  const timeoutMs = options.timeoutMs;
  const isHttps = target.url.protocol === 'https:';
  const method = req.method ?? 'GET';
  const headers = safeRequestHeaders(req.headers);
  headers['x-forwarded-for'] = target.clientIp;
  headers['x-forwarded-proto'] =
    typeof req.headers['x-forwarded-proto'] === 'string' ? req.headers['x-forwarded-proto'] : 'http';
  if (req.headers.host) headers['x-forwarded-host'] = req.headers.host;
  const extraHeaders = target.extraHeaders;
  for (const name in extraHeaders) headers[name] = extraHeaders[name];
  if (method !== 'GET' && method !== 'HEAD') headers['content-length'] = String(body?.length ?? 0);
  const bodySha256 = body?.length ? createHash('sha256').update(body).digest('hex') : EMPTY_BODY_SHA256;
  headers['x-paygate-signature'] = options.signer.signatureFor(
    method,
    target.url.path,
    bodySha256,
    extraHeaders,
    target.forwardingKey,
  );

  let settled = false;
  const upstream = (isHttps ? https : http).request(
    {
      protocol: target.url.protocol,
      hostname: target.url.hostname,
      port: target.url.port || undefined,
      path: target.url.path,
      method,
      headers,
      agent: isHttps ? options.agents.https : options.agents.http,
    },
    (upstreamRes: IncomingMessage) => {
      if (settled) {
        upstreamRes.resume();
        return;
      }
      settled = true;
      clearTimeout(timer);
      const status = upstreamRes.statusCode ?? 502;
      done({
        kind: 'answered',
        status,
        relay: (extra) => relayUpstream(upstreamRes, res, status, extra),
      });
    },
  );
  const timer = setTimeout(() => {
    upstream.destroy(new Error('timeout'));
    if (settled) return;
    settled = true;
    done({ kind: 'failed', reason: 'timeout', message: `the seller did not answer within ${timeoutMs} ms` });
  }, timeoutMs);
  upstream.on('error', (error) => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    done({ kind: 'failed', reason: 'unreachable', message: `the seller's API failed: ${error.message}` });
  });
  upstream.end(body);
}

/** forwardRequestThen as a promise (the async paths). */
export function forwardRequest(
  req: IncomingMessage,
  res: ServerResponse,
  target: ForwardTarget,
  options: ForwardOptions,
): Promise<ForwardResult> {
  return new Promise((resolve) => forwardRequestThen(req, res, target, options, resolve));
}
