import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { EMPTY_BODY_SHA256 } from '@paygate/protocol';
import type { Dispatcher } from 'undici';
import { ForwardAborted } from '../errors';
import type { ForwardingKey } from './forwarding-keys';
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
  // Node's server already answered a buyer's 100-continue; undici refuses to send the header on.
  'expect',
  'x-402-payment',
  'payment',
  // x402's payment headers: an authorization is the buyer's money, never the seller's to see or replay.
  'payment-signature',
  'x-payment',
  // x402's sign-in-with-x: the subscriber's signed message is for Paygate (its nonce is spent here).
  'sign-in-with-x',
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

interface ForwardTarget {
  clientIp: string;
  /** Raw bytes of a body already read (express.json); otherwise the request stream is read here. */
  rawBody?: Buffer;
  /** The seller's URL for this call: apiBaseUrl's origin, and its path + the endpoint path + query. */
  url: { origin: string; path: string };
  /** Extra headers telling the seller who paid. */
  extraHeaders: Readonly<Record<string, string>>;
  /** The seller's forwarding key (ForwardingKeys); null: the request is signed with ES256. */
  forwardingKey: ForwardingKey | null;
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
  /**
   * Connection pools to sellers (sellerDispatcher): in production, public addresses only, checked at connect.
   * undici rather than node:http's client: half the CPU per forwarded call (a third more calls per second
   * through the same proxy in `make bench`'s conditions), and keep-alive that honours the seller's timeout.
   */
  dispatcher: Dispatcher;
}

/** Connections kept per seller origin. */
export const FORWARD_CONNECTIONS_PER_ORIGIN = 256;

function safeRequestHeaders(incoming: IncomingHttpHeaders): OutgoingHttpHeaders {
  const headers: OutgoingHttpHeaders = {};
  for (const name in incoming) {
    const value = incoming[name];
    if (value === undefined || DROPPED_REQUEST_HEADERS.has(name)) continue;
    headers[name] = value;
  }
  return headers;
}

/**
 * Sends the buyer's request to the seller, signed. Resolves once: when the seller's response headers
 * arrived (the caller then decides, by status, what the payment becomes, and relays the body as a stream), or
 * with a failure on a connection error, when no response headers came within `timeoutMs`, or when the buyer's
 * body is over `maxBodyBytes` or did not arrive within `timeoutMs`.
 */
export function forwardRequest(
  req: IncomingMessage,
  res: ServerResponse,
  target: ForwardTarget,
  options: ForwardOptions,
): Promise<ForwardResult> {
  return new Promise((done) => {
    // express.json may have consumed a JSON body; its raw bytes were kept, so send them as they came.
    if (target.rawBody) sendUpstream(req, res, target, options, target.rawBody, done);
    else if (!hasRequestBody(req)) sendUpstream(req, res, target, options, undefined, done);
    else
      readBody(req, options, (body) => {
        if (Buffer.isBuffer(body)) sendUpstream(req, res, target, options, body, done);
        else done(body);
      });
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
  options.dispatcher.dispatch(
    {
      origin: target.url.origin,
      path: target.url.path,
      method: method as Dispatcher.HttpMethod,
      headers: headers as Record<string, string | string[]>,
      body: body ?? null,
      // UpstreamCall's timer bounds the wait for the answer's headers, connection included; undici's own
      // headersTimeout is the same bound as a backstop, and bodyTimeout bounds each pause between body chunks.
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
    },
    new UpstreamCall(res, options.timeoutMs, done),
  );
}

/** How much of the seller's answer is read ahead while the caller decides what the payment becomes. */
const HELD_ANSWER_MAX_BYTES = 64 * 1024;

function upstreamTimedOut(call: UpstreamCall): void {
  call.timeOut();
}

/**
 * One forwarded call, as undici's dispatch handler and, once the seller's headers are in, as the `answered`
 * result itself (no object per call beyond this one). The seller's body waits (paused, kept) until the
 * caller relays it, since the caller first decides by status what the payment becomes.
 */
class UpstreamCall implements Dispatcher.DispatchHandler {
  readonly kind = 'answered';
  status = 0;
  private controller: Dispatcher.DispatchController | undefined;
  private upstreamHeaders: IncomingHttpHeaders = {};
  /** `done` was called: with the answer, or with a failure. */
  private settled = false;
  private relaying = false;
  private ended = false;
  private failedAfterHeaders = false;
  private held: Buffer[] | undefined;
  private heldBytes = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly res: ServerResponse,
    private readonly timeoutMs: number,
    private readonly done: (result: ForwardResult) => void,
  ) {
    this.timer = setTimeout(upstreamTimedOut, timeoutMs, this);
  }

  timeOut(): void {
    if (this.settled) return;
    this.settled = true;
    this.controller?.abort(ForwardAborted.timeout());
    this.done(this.timedOut());
  }

  private timedOut(): ForwardResult {
    return {
      kind: 'failed',
      reason: 'timeout',
      message: `the seller did not answer within ${this.timeoutMs} ms`,
    };
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    // Timed out while waiting for a connection: never sent.
    if (this.settled) controller.abort(ForwardAborted.timeout());
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
  ): void {
    if (statusCode < 200) return; // 1xx: the answer is still to come
    if (this.settled) {
      controller.abort(ForwardAborted.timeout());
      return;
    }
    this.settled = true;
    clearTimeout(this.timer);
    this.status = statusCode;
    this.upstreamHeaders = headers;
    this.done(this as ForwardResult);
  }

  /** Streams the seller's answer to the buyer: one writeHead (safe upstream headers + extra ones), then the body. */
  relay(extraHeaders: Readonly<Record<string, string>>): void {
    const res = this.res;
    if (this.failedAfterHeaders) {
      res.destroy();
      return;
    }
    const headers: OutgoingHttpHeaders = {};
    const answered = this.upstreamHeaders;
    for (const name in answered) {
      const value = answered[name];
      if (value !== undefined && !DROPPED_RESPONSE_HEADERS.has(name)) headers[name] = value;
    }
    for (const name in extraHeaders) headers[name] = extraHeaders[name];
    res.writeHead(this.status, headers);
    this.relaying = true;
    const held = this.held;
    this.held = undefined;
    if (this.ended) {
      // The whole answer is here (the usual small one): headers, body and end leave in one write.
      if (!held) res.end();
      else {
        for (let i = 0; i < held.length - 1; i++) res.write(held[i]);
        res.end(held[held.length - 1]);
      }
      return;
    }
    if (held) for (const chunk of held) res.write(chunk);
    if (this.controller?.paused) this.controller.resume();
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (!this.relaying) {
      if (this.held) this.held.push(chunk);
      else this.held = [chunk];
      // Keep reading a small answer to its end (relayed in one write); pause a large one until it is relayed.
      this.heldBytes += chunk.length;
      if (this.heldBytes > HELD_ANSWER_MAX_BYTES) controller.pause();
      return;
    }
    const res = this.res;
    if (res.destroyed) {
      controller.abort(ForwardAborted.buyerClosed());
      return;
    }
    if (!res.write(chunk)) {
      // The buyer reads slower than the seller sends: wait for it (or for its going away).
      controller.pause();
      const resume = () => {
        res.off('close', resume);
        res.off('drain', resume);
        if (res.destroyed) controller.abort(ForwardAborted.buyerClosed());
        else controller.resume();
      };
      res.on('drain', resume);
      res.on('close', resume);
    }
  }

  onResponseEnd(): void {
    if (this.relaying) this.res.end();
    else this.ended = true;
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    if (!this.settled) {
      this.settled = true;
      clearTimeout(this.timer);
      this.done(
        (error as { code?: string }).code === 'UND_ERR_HEADERS_TIMEOUT'
          ? this.timedOut()
          : { kind: 'failed', reason: 'unreachable', message: `the seller's API failed: ${error.message}` },
      );
      return;
    }
    // Cut off mid-answer: the buyer's connection is cut too, never a truncated body passed off as whole.
    if (this.relaying) this.res.destroy();
    else this.failedAfterHeaders = true;
  }
}
