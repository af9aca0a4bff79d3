import { createHash } from 'node:crypto';
import type { Request, Response } from 'express';
import { HttpError, HttpReason } from './errors';

/**
 * The Idempotency-Key rule of every service (as Stripe's): 1-255 visible ASCII characters, else 400; keys are
 * scoped per seller; a request is its fingerprint (method, path without query, canonical JSON body, none = `{}`);
 * the same key and request replay the stored answer (`Idempotent-Replayed: true`), another request is 409.
 * Each service stores keys in its own table: `IdempotencyStore` inside the effect's transaction,
 * `IdempotencyClaims` when the work spans transactions, or the fingerprint and `refuseOtherRequest` directly.
 */
const IDEMPOTENCY_KEY_HEADER = 'Idempotency-Key';
export const IDEMPOTENCY_KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;
const IDEMPOTENCY_KEY_RULE = 'must be 1-255 visible ASCII characters';
const IDEMPOTENT_REPLAYED_HEADER = 'Idempotent-Replayed';

/** The key as sent, checked (undefined when the header is absent: the request is not idempotent). */
export function checkIdempotencyKey(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (!IDEMPOTENCY_KEY_PATTERN.test(value)) {
    throw new HttpError(400, HttpReason.InvalidRequest, `${IDEMPOTENCY_KEY_HEADER} ${IDEMPOTENCY_KEY_RULE}`, {
      field: IDEMPOTENCY_KEY_HEADER,
      rule: IDEMPOTENCY_KEY_RULE,
    });
  }
  return value;
}

export function idempotencyKeyOf(req: Request): string | undefined {
  return checkIdempotencyKey(req.header(IDEMPOTENCY_KEY_HEADER));
}

/** JSON with object keys sorted, so that two bodies that differ only in key order are the same request. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : 1));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

interface RequestIdentity {
  method: string;
  /** The request path; a query string is dropped. */
  path: string;
  body: unknown;
}

/** What identifies a request for its key: sha256 of method, path and canonical body (see the module comment). */
export function requestFingerprint(request: RequestIdentity): string {
  const path = request.path.split('?')[0];
  return createHash('sha256')
    .update(`${request.method.toUpperCase()} ${path}\n${canonicalJson(request.body ?? {})}`)
    .digest('hex');
}

export function fingerprintOf(req: Request): string {
  return requestFingerprint({ method: req.method, path: req.originalUrl, body: req.body });
}

/** Same request: nothing to say; another request under the key: 409 idempotency_key_reused. */
export function refuseOtherRequest(storedFingerprint: string, fingerprint: string): void {
  if (storedFingerprint === fingerprint) return;
  throw new HttpError(
    409,
    HttpReason.IdempotencyKeyReused,
    'this Idempotency-Key was used with a different request',
    { field: IDEMPOTENCY_KEY_HEADER, rule: 'must not be reused with a different body' },
  );
}

type StoredAnswer = { status: number; body: unknown };

export interface IdempotentAnswer extends StoredAnswer {
  /** The stored answer to an earlier request with this key (sent with `Idempotent-Replayed: true`). */
  replayed?: boolean;
}

export function sendIdempotentAnswer(res: Response, answer: IdempotentAnswer): void {
  if (answer.replayed) res.setHeader(IDEMPOTENT_REPLAYED_HEADER, 'true');
  res.status(answer.status).json(answer.body);
}

/** A request under a key: whose (scope, usually the seller id), which key, and its fingerprint. */
export interface IdempotentRequest {
  scope: string;
  key: string;
  fingerprint: string;
}

export interface StoredKey {
  fingerprint: string;
  /** Null while the first request with the key runs (IdempotencyClaims only). */
  answer: StoredAnswer | null;
  /** When the key was claimed, to the millisecond (IdempotencyClaims: the claim's holder). */
  createdAt?: Date;
}

/** The stored answer when it is the same request, replayed; 409 when the key came with another request. */
function replayOrRefuse(stored: StoredKey, fingerprint: string): IdempotentAnswer | undefined {
  refuseOtherRequest(stored.fingerprint, fingerprint);
  return stored.answer ? { ...stored.answer, replayed: true } : undefined;
}

/** Keys stored in the transaction that makes the effect: the answer commits (or not) with it. */
export interface IdempotencyStore {
  /** Holds concurrent requests with this key until the transaction ends (an advisory lock). */
  lock(request: IdempotentRequest): Promise<void>;
  find(request: IdempotentRequest): Promise<StoredKey | undefined>;
  save(request: IdempotentRequest, answer: StoredAnswer): Promise<void>;
}

/** Runs `run` at most once per key, in the store's transaction (a duplicate waits on the lock, then replays). */
export async function idempotentInTransaction(
  store: IdempotencyStore,
  request: IdempotentRequest | undefined,
  run: () => Promise<IdempotentAnswer>,
): Promise<IdempotentAnswer> {
  if (!request) return run();
  await store.lock(request);
  const stored = await store.find(request);
  const replay = stored && replayOrRefuse(stored, request.fingerprint);
  if (replay) return replay;
  const answer = await run();
  await store.save(request, { status: answer.status, body: answer.body });
  return answer;
}

/**
 * Keys claimed before the work runs, outside any transaction (waiters holding connections would deadlock the
 * pool). Only the request whose claim time the row carries completes or releases it.
 */
export interface IdempotencyClaims {
  /** The claim time when this request took the key (no row existed); undefined otherwise. */
  claim(request: IdempotentRequest): Promise<Date | undefined>;
  find(request: IdempotentRequest): Promise<StoredKey | undefined>;
  /** Takes over an unanswered claim still made at `abandonedAt` (as `find` read): the new claim time, if won. */
  takeOver(request: IdempotentRequest, abandonedAt: Date): Promise<Date | undefined>;
  /** Stores the answer on the claim made at `claimedAt` (nothing when the claim is no longer this request's). */
  complete(request: IdempotentRequest, claimedAt: Date, answer: StoredAnswer): Promise<void>;
  /** Gives back the claim made at `claimedAt` without an answer (the work failed), so the key may be used again. */
  release(request: IdempotentRequest, claimedAt: Date): Promise<void>;
}

interface ClaimTimings {
  /** How long a duplicate waits for the first request's answer before 409 (a bound, not a sleep). */
  duplicateWaitMs: number;
  pollMs: number;
  /** A claim this old without an answer belongs to a request that died: the next request takes it over. */
  abandonedAfterMs: number;
}

const DEFAULT_CLAIM_TIMINGS: ClaimTimings = { duplicateWaitMs: 15_000, pollMs: 50, abandonedAfterMs: 60_000 };

/**
 * Runs `run` at most once per key: the first request claims it, runs and stores the answer; a duplicate polls
 * and replays it, or answers 409 after `duplicateWaitMs`. A run that threw stores nothing (the key may retry).
 */
export async function idempotentWithClaim(
  claims: IdempotencyClaims,
  request: IdempotentRequest | undefined,
  run: () => Promise<IdempotentAnswer>,
  timings: ClaimTimings = DEFAULT_CLAIM_TIMINGS,
): Promise<IdempotentAnswer> {
  if (!request) return run();
  const deadline = Date.now() + timings.duplicateWaitMs;
  while (Date.now() < deadline) {
    const claimedAt = await claims.claim(request);
    if (claimedAt) return runClaimed(claims, request, claimedAt, run);
    const stored = await claims.find(request);
    if (!stored) continue; // the first request failed and gave its claim back: claim it again
    const replay = replayOrRefuse(stored, request.fingerprint);
    if (replay) return replay;
    if (stored.createdAt && Date.now() - stored.createdAt.getTime() > timings.abandonedAfterMs) {
      // One duplicate takes it over (the claim time it read must still be there); the others wait for it.
      const takenAt = await claims.takeOver(request, stored.createdAt);
      if (takenAt) return runClaimed(claims, request, takenAt, run);
      continue;
    }
    await new Promise((resolve) => setTimeout(resolve, timings.pollMs));
  }
  throw new HttpError(
    409,
    HttpReason.IdempotencyRequestInProgress,
    'a request with this Idempotency-Key is still running; retry shortly with the same key',
  );
}

async function runClaimed(
  claims: IdempotencyClaims,
  request: IdempotentRequest,
  claimedAt: Date,
  run: () => Promise<IdempotentAnswer>,
): Promise<IdempotentAnswer> {
  let answer: IdempotentAnswer;
  try {
    answer = await run();
  } catch (error) {
    await claims.release(request, claimedAt);
    throw error;
  }
  await claims.complete(request, claimedAt, { status: answer.status, body: answer.body });
  return answer;
}
