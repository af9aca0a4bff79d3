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
  // Node already answered a buyer's 100-continue; undici refuses to send the header on.
  'expect',
  'x-402-payment',
  'payment',
  // An authorization is the buyer's money, a sign-in message is for Paygate: never the seller's to see or replay.
  'payment-signature',
  'x-payment',
  'sign-in-with-x',
  'x-402-ticket',
  'authorization',
  'cookie',
  'x-forwarded-for',
  'x-forwarded-host',
  'x-forwarded-proto',
  'x-real-ip',
  // Only the gateway signs: a buyer's value never reaches the seller.
  'x-paygate-signature',
]);
const DROPPED_RESPONSE_HEADERS = new Set([
  // Only Paygate states what was paid.
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
  rawBody?: Buffer;
  url: { origin: string; path: string };
  extraHeaders: Readonly<Record<string, string>>;
  /** null: the request is signed with ES256. */
  forwardingKey: ForwardingKey | null;
}

export type ForwardResult =
  | {
      kind: 'answered';
      status: number;
      relay(extraHeaders: Readonly<Record<string, string>>): void;
    }
  | { kind: 'failed'; reason: ForwardFailureReason; message: string };

export type ForwardFailureReason = 'timeout' | 'unreachable' | 'body_too_large' | 'body_incomplete';

export interface ForwardOptions {
  timeoutMs: number;
  signer: RequestSigner;
  maxBodyBytes: number;
  /** Pools to sellers (public addresses only in production): undici takes half node:http's CPU per forwarded call. */
  dispatcher: Dispatcher;
}

export const FORWARD_CONNECTIONS_PER_ORIGIN = 256;

function keptHeaders(incoming: IncomingHttpHeaders, dropped: ReadonlySet<string>): OutgoingHttpHeaders {
  const headers: OutgoingHttpHeaders = {};
  for (const name in incoming) {
    const value = incoming[name];
    if (value !== undefined && !dropped.has(name)) headers[name] = value;
  }
  return headers;
}

/** Resolves once: with the seller's response headers (the body relayed later as a stream), or with a failure. */
export function forwardRequest(
  req: IncomingMessage,
  res: ServerResponse,
  target: ForwardTarget,
  options: ForwardOptions,
): Promise<ForwardResult> {
  return new Promise((done) => {
    // express.json may have consumed a JSON body: its raw bytes are sent as they came.
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
const failed = (reason: ForwardFailureReason, message: string): BodyFailure => ({
  kind: 'failed',
  reason,
  message,
});

/** The buyer's body, whole, so its hash is signed; past the bound the rest is drained so the buyer gets an answer. */
function readBody(
  req: IncomingMessage,
  options: ForwardOptions,
  then: (body: Buffer | BodyFailure) => void,
): void {
  const max = options.maxBodyBytes;
  const tooLarge = failed('body_too_large', `the request body must be at most ${max} bytes`);
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
  const onError = () => finish(failed('body_incomplete', 'the request body did not arrive whole'));
  const timer = setTimeout(
    () => finish(failed('body_incomplete', `the request body did not arrive within ${options.timeoutMs} ms`)),
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
  const headers = keptHeaders(req.headers, DROPPED_REQUEST_HEADERS);
  headers['x-forwarded-for'] = target.clientIp;
  headers['x-forwarded-proto'] =
    typeof req.headers['x-forwarded-proto'] === 'string' ? req.headers['x-forwarded-proto'] : 'http';
  if (req.headers.host) headers['x-forwarded-host'] = req.headers.host;
  Object.assign(headers, target.extraHeaders);
  if (method !== 'GET' && method !== 'HEAD') headers['content-length'] = String(body?.length ?? 0);
  const bodySha256 = body?.length ? createHash('sha256').update(body).digest('hex') : EMPTY_BODY_SHA256;
  headers['x-paygate-signature'] = options.signer.signatureFor(
    method,
    target.url.path,
    bodySha256,
    target.extraHeaders,
    target.forwardingKey,
  );
  options.dispatcher.dispatch(
    {
      origin: target.url.origin,
      path: target.url.path,
      method: method as Dispatcher.HttpMethod,
      headers: headers as Record<string, string | string[]>,
      body: body ?? null,
      // UpstreamCall's timer bounds the headers wait; undici's headersTimeout backs it, bodyTimeout bounds each pause.
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
    },
    new UpstreamCall(res, options.timeoutMs, done),
  );
}

const HELD_ANSWER_MAX_BYTES = 64 * 1024;

function upstreamTimedOut(call: UpstreamCall): void {
  call.timeOut();
}

/** undici's dispatch handler, and once the headers are in the `answered` result; the body waits until relayed. */
class UpstreamCall implements Dispatcher.DispatchHandler {
  readonly kind = 'answered';
  status = 0;
  private controller: Dispatcher.DispatchController | undefined;
  private upstreamHeaders: IncomingHttpHeaders = {};
  private settled = false;
  private relaying = false;
  private ended = false;
  private failedAfterHeaders = false;
  private held: Buffer[] = [];
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
    return failed('timeout', `the seller did not answer within ${this.timeoutMs} ms`);
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

  relay(extraHeaders: Readonly<Record<string, string>>): void {
    const res = this.res;
    if (this.failedAfterHeaders) {
      res.destroy();
      return;
    }
    res.writeHead(
      this.status,
      Object.assign(keptHeaders(this.upstreamHeaders, DROPPED_RESPONSE_HEADERS), extraHeaders),
    );
    this.relaying = true;
    const held = this.held;
    this.held = [];
    // The whole (usual, small) answer leaves in one write.
    const last = this.ended ? held.pop() : undefined;
    for (const chunk of held) res.write(chunk);
    if (this.ended) res.end(last);
    else if (this.controller?.paused) this.controller.resume();
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (!this.relaying) {
      this.held.push(chunk);
      // Read a small answer to its end (relayed in one write); pause a large one until it is relayed.
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
          : failed('unreachable', `the seller's API failed: ${error.message}`),
      );
      return;
    }
    // Cut off mid-answer: never a truncated body passed off as whole.
    if (this.relaying) this.res.destroy();
    else this.failedAfterHeaders = true;
  }
}
