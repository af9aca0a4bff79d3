import { createHash } from 'node:crypto';
import { badRequest, conflict } from '@paygate/http';
import type { Request, Response } from 'express';
import { type Kysely, sql } from 'kysely';
import type { RegistryDatabase } from '../db';

const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

/**
 * Idempotency-Key support for creating POSTs: the same key with the same request replays the stored
 * response; the same key with another request is refused with 409 idempotency_key_reused.
 * Only successful responses are stored, so a request that failed may be retried with the same key.
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
  // Requests with the same key are serialised by a transaction-scoped advisory lock, so a concurrent
  // duplicate waits for the first to store its answer and replays it instead of running the handler again.
  const answer = await db.transaction().execute(async (trx) => {
    await sql`select pg_advisory_xact_lock(hashtextextended(${`registry-idempotency:${sellerId}:${key}`}, 0))`.execute(
      trx,
    );
    const stored = await trx
      .selectFrom('idempotency_keys')
      .selectAll()
      .where('seller_id', '=', sellerId)
      .where('key', '=', key)
      .executeTakeFirst();
    if (stored) {
      if (stored.request_hash !== requestHash) {
        throw conflict('idempotency_key_reused', 'this Idempotency-Key was used with a different request');
      }
      return { status: stored.response_status, body: stored.response_body as unknown, replayed: true };
    }
    const result = await handler();
    await trx
      .insertInto('idempotency_keys')
      .values({
        seller_id: sellerId,
        key,
        request_hash: requestHash,
        response_status: result.status,
        response_body: JSON.stringify(result.body),
      })
      .execute();
    return { ...result, replayed: false };
  });
  if (answer.replayed) res.setHeader('idempotent-replayed', 'true');
  res.status(answer.status).json(answer.body);
}

export function isUniqueViolation(error: unknown, constraint?: string): boolean {
  const e = error as { code?: string; constraint?: string };
  return e?.code === '23505' && (constraint === undefined || e.constraint === constraint);
}
