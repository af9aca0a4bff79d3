import { createHash, type KeyObject, timingSafeEqual, verify } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import {
  EMPTY_BODY_SHA256,
  FORWARDING_KEY_ID,
  forwardingKeyFromApiKey,
  forwardingSignature,
  PAID_REQUEST_HEADERS,
  parseRequestSignature,
  REQUEST_SIGNATURE_HEADER,
  type RequestSignature,
  requestSigningPayload,
} from '@paygate/protocol';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { answerUnavailable, sendError } from './error-answers';
import { JwksKeys } from './jwks';
import { PaygateApi, PaygateUnavailableError } from './paygate-api';
import { resolvePaygateUrl } from './paygate-url';
import { MemoryReplayStore } from './tickets';
import type { TicketReplayStore } from './types';

export interface VerifyPaygateRequestOptions {
  /**
   * Your secret API key (sk_…), default PAYGATE_SECRET_KEY: Paygate signs with a key derived from it (`kid=sk`).
   * During a key rotation pass both (`[newKey, oldKey]`, or set PAYGATE_PREVIOUS_SECRET_KEY).
   */
  secretKey?: string | readonly string[];
  /** Paygate's address, for the JWKS of keys predating forwarding keys; default as GatewayConfig's. */
  paygateUrl?: string;
  /** How far the signature's timestamp may be from this server's clock. Default 300 s. */
  toleranceSeconds?: number;
  /** Where seen nonces are kept; in memory by default (100 000). Share one across replicas. */
  replayStore?: TicketReplayStore;
  /** Only requests for these skill names pass (403 otherwise). Default: any skill. */
  skills?: string[];
  /** Largest body read to check its hash. Default 10 MiB (the gateway's own limit). */
  maxBodyBytes?: number;
  /** Longest wait for Paygate's JWKS. Default 5000 ms. */
  timeoutMs?: number;
  fetch?: typeof fetch;
}

/** What a verified request carries (req.paygate): the signed X-Paygate-* values. */
export interface PaygateRequest {
  skill: string;
  txHash: string;
  payer: string;
  amount: string;
  nonce: string;
  signedAt: Date;
}

type Refusal = { status: number; reason: string; message: string };
const refusal = (reason: string, message: string, status = 401): Refusal => ({ status, reason, message });

/** The seller's secret keys: the option (one or a list), else PAYGATE_SECRET_KEY and PAYGATE_PREVIOUS_SECRET_KEY. */
function secretKeysOf(options: VerifyPaygateRequestOptions): string[] {
  const { PAYGATE_SECRET_KEY, PAYGATE_PREVIOUS_SECRET_KEY } = process.env;
  const given =
    options.secretKey === undefined ? [PAYGATE_SECRET_KEY, PAYGATE_PREVIOUS_SECRET_KEY] : options.secretKey;
  const secretKeys = [given].flat().filter((key): key is string => typeof key === 'string' && key !== '');
  if (secretKeys.some((key) => !key.startsWith('sk_')))
    throw new TypeError('verifyPaygateRequest: secretKey must be the sk_… key from the dashboard');
  if (secretKeys.length > 4) throw new TypeError('verifyPaygateRequest: at most 4 secret keys');
  return secretKeys;
}

/** Paygate's JWKS, when its address is known or no secret key leaves another way to check a signature. */
function paygateKeysOf(options: VerifyPaygateRequestOptions, forwardingKeys: Buffer[]): JwksKeys | undefined {
  const hasPaygateUrl =
    options.paygateUrl !== undefined ||
    process.env.PAYGATE_BASE_URL !== undefined ||
    process.env.NODE_ENV === 'development';
  if (!hasPaygateUrl && forwardingKeys.length > 0) return undefined;
  const url = resolvePaygateUrl(options.paygateUrl, 'verifyPaygateRequest: paygateUrl');
  return new JwksKeys(new PaygateApi(url, '', options.timeoutMs ?? 5000, options.fetch ?? fetch));
}

/** The middleware's settings, resolved once from its options and the environment. */
function requestChecksOf(options: VerifyPaygateRequestOptions) {
  const forwardingKeys = secretKeysOf(options).map((key) => forwardingKeyFromApiKey(key));
  return {
    toleranceSeconds: options.toleranceSeconds ?? 300,
    replay: options.replayStore ?? new MemoryReplayStore(),
    maxBodyBytes: options.maxBodyBytes ?? 10 * 1024 * 1024,
    skills: options.skills ? new Set(options.skills) : undefined,
    forwardingKeys,
    keys: paygateKeysOf(options, forwardingKeys),
  };
}

type RequestChecks = ReturnType<typeof requestChecksOf>;

/** The request's X-Paygate-Signature, parsed and within the timestamp tolerance. */
function freshSignature(req: Request, toleranceSeconds: number): Refusal | RequestSignature {
  const header = req.header(REQUEST_SIGNATURE_HEADER);
  if (!header) return refusal('missing_signature', `no ${REQUEST_SIGNATURE_HEADER}: call through Paygate`);
  const signature = parseRequestSignature(header);
  if (!signature)
    return refusal(
      'malformed_signature',
      `${REQUEST_SIGNATURE_HEADER} must be "v1; kid=…; t=…; nonce=…; sig=…"`,
    );
  const skewSeconds = Math.abs(Date.now() / 1000 - signature.timestamp);
  if (skewSeconds > toleranceSeconds)
    return refusal(
      'stale_signature',
      `signed ${Math.round(skewSeconds)} s away from this server's clock (at most ${toleranceSeconds} s)`,
    );
  return signature;
}

/** Paygate's ES256 key of the signature's kid, or none for `kid=sk`; a refusal when this middleware has no such key. */
async function signatureKey(
  checks: RequestChecks,
  signature: RequestSignature,
): Promise<Refusal | { key: KeyObject | undefined }> {
  const byForwardingKey = signature.kid === FORWARDING_KEY_ID;
  if (byForwardingKey && checks.forwardingKeys.length === 0)
    return refusal(
      'secret_key_required',
      'this request is signed with the key derived from your secret API key: pass verifyPaygateRequest({ secretKey }) or set PAYGATE_SECRET_KEY',
    );
  if (byForwardingKey) return { key: undefined };
  if (!checks.keys)
    return refusal(
      'unknown_key',
      `signed with Paygate's key ${signature.kid}, which needs Paygate's address: pass verifyPaygateRequest({ paygateUrl }) or set PAYGATE_BASE_URL`,
    );
  const key = await checks.keys.key(signature.kid);
  if (!key) return refusal('unknown_key', `Paygate publishes no key ${signature.kid}`);
  return { key };
}

type PaidHeaders = Pick<PaygateRequest, 'skill' | 'txHash' | 'payer' | 'amount'>;

function paidHeadersOf(req: Request): PaidHeaders {
  const entries = Object.entries(PAID_REQUEST_HEADERS).map(([field, name]) => [
    field,
    req.header(name) ?? '',
  ]);
  return Object.fromEntries(entries) as PaidHeaders;
}

function signatureMatches(
  req: Request,
  signature: RequestSignature,
  key: KeyObject | undefined,
  forwardingKeys: readonly Buffer[],
  body: Buffer,
  paid: PaidHeaders,
): boolean {
  const payload = requestSigningPayload({
    kid: signature.kid,
    timestamp: signature.timestamp,
    nonce: signature.nonce,
    method: req.method,
    pathAndQuery: req.originalUrl,
    bodySha256: body.length ? createHash('sha256').update(body).digest('hex') : EMPTY_BODY_SHA256,
    ...paid,
  });
  return key
    ? verify(
        'sha256',
        Buffer.from(payload),
        { key, dsaEncoding: 'ieee-p1363' },
        Buffer.from(signature.signature, 'base64url'),
      )
    : matchesAnyForwardingKey(forwardingKeys, payload, [signature.signature, signature.previousSignature]);
}

/** Every check of a forwarded request, in order: the first that fails answers. */
async function checkForwardedRequest(checks: RequestChecks, req: Request): Promise<Refusal | PaygateRequest> {
  const signature = freshSignature(req, checks.toleranceSeconds);
  if ('status' in signature) return signature;
  const signing = await signatureKey(checks, signature);
  if ('status' in signing) return signing;
  const body = await bodyOf(req, checks.maxBodyBytes);
  if (!Buffer.isBuffer(body)) return body;
  const paid = paidHeadersOf(req);
  if (!signatureMatches(req, signature, signing.key, checks.forwardingKeys, body, paid)) {
    const mismatch = 'the signature does not match this method, path, body and X-Paygate-* headers';
    return refusal(
      'invalid_signature',
      signature.kid === FORWARDING_KEY_ID
        ? `${mismatch} under the key derived from your secret API key (rotated it? deploy the new one)`
        : mismatch,
    );
  }
  if (checks.skills && !checks.skills.has(paid.skill))
    return refusal('wrong_skill', `this server does not sell skill "${paid.skill}"`, 403);
  // Checked last, so only a genuine signature takes a place in the store.
  const expiresAtMs = (signature.timestamp + checks.toleranceSeconds) * 1000;
  if (!(await checks.replay.markUsed(`paygate-request:${signature.nonce}`, expiresAtMs)))
    return refusal('replayed_request', 'this signed request was already accepted once');
  const unparsable = parseJsonBody(req);
  if (unparsable) return unparsable;
  return { ...paid, nonce: signature.nonce, signedAt: new Date(signature.timestamp * 1000) };
}

/**
 * A PROXY-mode seller's origin passes only requests Paygate signed after a payment, setting req.paygate.
 * Mount it before any body parser (it reads the body itself), or keep the bytes in req.rawBody from the parser.
 */
export function verifyPaygateRequest(options: VerifyPaygateRequestOptions = {}): RequestHandler {
  const checks = requestChecksOf(options);
  return (req: Request, res: Response, next: NextFunction) => {
    checkForwardedRequest(checks, req).then(
      (outcome) => {
        if ('status' in outcome) return sendError(res, outcome.status, outcome.reason, outcome.message);
        req.paygate = outcome;
        next();
      },
      (error) =>
        error instanceof PaygateUnavailableError ? answerUnavailable(res, error.message) : next(error),
    );
  };
}

/** Whether a forwarding key made `sig` or `sig_prev`; every pair is compared in constant time, so timing says nothing. */
function matchesAnyForwardingKey(
  keys: readonly Buffer[],
  payload: string,
  signatures: ReadonlyArray<string | undefined>,
): boolean {
  let matched = false;
  for (const key of keys) {
    const expected = Buffer.from(forwardingSignature(key, payload));
    for (const signature of signatures) {
      if (signature === undefined) continue;
      const given = Buffer.from(signature);
      if (given.length === expected.length && timingSafeEqual(expected, given)) matched = true;
    }
  }
  return matched;
}

function declaresBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** The body bytes: kept by an earlier parser, or read here (bounded) and left on req.rawBody. */
async function bodyOf(req: Request, maxBytes: number): Promise<Buffer | Refusal> {
  if (Buffer.isBuffer(req.rawBody)) return req.rawBody;
  if (Buffer.isBuffer(req.body)) return req.body;
  if (!declaresBody(req)) return Buffer.alloc(0);
  if (req.readableEnded)
    return refusal(
      'body_unavailable',
      'a body parser read the body before verifyPaygateRequest: mount it first, or keep the bytes in req.rawBody',
      500,
    );
  const tooLarge = refusal('body_too_large', `the body must be at most ${maxBytes} bytes`, 413);
  if (Number(req.headers['content-length'] ?? 0) > maxBytes) return tooLarge;
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) return tooLarge;
    chunks.push(chunk);
  }
  req.rawBody = Buffer.concat(chunks, size);
  return req.rawBody;
}

/** A JSON body this middleware read goes on req.body, as express.json would have put it. */
function parseJsonBody(req: Request): Refusal | undefined {
  if (req.body !== undefined || !req.rawBody?.length) return undefined;
  if (!/\bjson\b/i.test(req.headers['content-type'] ?? '')) return undefined;
  try {
    req.body = JSON.parse(req.rawBody.toString('utf8'));
    return undefined;
  } catch {
    return refusal('invalid_json', 'the body is not valid JSON', 400);
  }
}
