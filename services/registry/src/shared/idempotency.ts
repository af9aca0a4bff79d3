import { createHash } from 'node:crypto';
import { badRequest, conflict } from '@paygate/http';
import type { Request, Response } from 'express';
import type { Kysely } from 'kysely';
import type { RegistryDatabase } from '../db';

const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

/** How long a duplicate waits for the first request with its key before answering 409 (a bound, not a sleep). */
const DUPLICATE_WAIT_MS = 15_000;
const DUPLICATE_POLL_MS = 50;
/** A claim this old without a response belongs to a request that died: the next request with the key takes it over. */
const ABANDONED_CLAIM_MS = 60_000;

/**
 * Idempotency-Key support for creating POSTs: the same key with the same request replays the stored
 * response; the same key with another request is refused with 409 idempotency_key_reused.
 * Only successful responses are stored, so a request that failed may be retried with the same key.
 *
 * The first request claims the key with a row that has no response yet, runs, then stores its response; a
 * concurrent duplicate polls that row and replays the response. No connection is held while a request runs or
 * waits: holding one (a transaction with an advisory lock around the handler, which opens its own) deadlocked the
 * pool as soon as the waiters took every connection.
 */
export async function idempotent(
  db: Kysely<RegistryDatabase>,
  req: Request,
  res: Response,
  sellerId: string,
  handler: () => Promise<{ status: number; body: unknown }>,
): Promise<void> {
  const key = req.header('idempotency-key');
  if (key === undefined) {
    const result = await handler();
    res.status(result.status).json(result.body);
    return;
  }
  if (!KEY_PATTERN.test(key)) throw badRequest('Idempotency-Key', 'must be 1-255 printable ASCII characters');
  const requestHash = createHash('sha256')
    .update(`${req.method} ${req.originalUrl}\n${JSON.stringify(req.body ?? null)}`)
    .digest('hex');
  const thisKey = db.selectFrom('idempotency_keys').where('seller_id', '=', sellerId).where('key', '=', key);
  const deadline = Date.now() + DUPLICATE_WAIT_MS;
  while (Date.now() < deadline) {
    const claimed = await db
      .insertInto('idempotency_keys')
      .values({
        seller_id: sellerId,
        key,
        request_hash: requestHash,
        response_status: null,
        response_body: null,
      })
      .onConflict((conflict) => conflict.columns(['seller_id', 'key']).doNothing())
      .returning('key')
      .executeTakeFirst();
    if (claimed) {
      const result = await runClaimed(db, sellerId, key, handler);
      res.status(result.status).json(result.body);
      return;
    }
    const stored = await thisKey.selectAll().executeTakeFirst();
    if (!stored) continue; // the first request failed and gave its claim back: claim it again
    if (stored.request_hash !== requestHash) {
      throw conflict('idempotency_key_reused', 'this Idempotency-Key was used with a different request');
    }
    if (stored.response_status !== null) {
      res.setHeader('idempotent-replayed', 'true');
      res.status(stored.response_status).json(stored.response_body);
      return;
    }
    if (Date.now() - stored.created_at.getTime() > ABANDONED_CLAIM_MS) {
      await releaseClaim(db, sellerId, key);
      continue;
    }
    await new Promise((resolve) => setTimeout(resolve, DUPLICATE_POLL_MS));
  }
  throw conflict(
    'idempotency_request_in_progress',
    'a request with this Idempotency-Key is still running; retry shortly with the same key',
  );
}

async function runClaimed(
  db: Kysely<RegistryDatabase>,
  sellerId: string,
  key: string,
  handler: () => Promise<{ status: number; body: unknown }>,
): Promise<{ status: number; body: unknown }> {
  let result: { status: number; body: unknown };
  try {
    result = await handler();
  } catch (error) {
    await releaseClaim(db, sellerId, key);
    throw error;
  }
  await db
    .updateTable('idempotency_keys')
    .set({ response_status: result.status, response_body: JSON.stringify(result.body) })
    .where('seller_id', '=', sellerId)
    .where('key', '=', key)
    .execute();
  return result;
}

/** Gives a claim without a response back, so the key may be used again (a failed or abandoned request). */
async function releaseClaim(db: Kysely<RegistryDatabase>, sellerId: string, key: string): Promise<void> {
  await db
    .deleteFrom('idempotency_keys')
    .where('seller_id', '=', sellerId)
    .where('key', '=', key)
    .where('response_status', 'is', null)
    .execute();
}

export function isUniqueViolation(error: unknown, constraint?: string): boolean {
  const e = error as { code?: string; constraint?: string };
  return e?.code === '23505' && (constraint === undefined || e.constraint === constraint);
}
