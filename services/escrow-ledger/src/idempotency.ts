import { createHash } from 'node:crypto';
import { badRequest, HttpError } from '@paygate/http';
import type { Request, Response } from 'express';
import { sql, type Transaction } from 'kysely';

export interface StoredResponse {
  status: number;
  body: unknown;
  /** The stored answer to an earlier request with this key (sent with `Idempotent-Replayed: true`). */
  replayed?: boolean;
}

/**
 * Runs `fn` at most once per (seller, Idempotency-Key): the key, a hash of the request and the response are
 * stored in the same transaction as the effect. The same key with the same request answers the stored
 * response; with another request, 409 idempotency_key_reused. An advisory lock serialises concurrent retries.
 */
export async function withIdempotency(
  trx: Transaction<any>,
  req: Request,
  sellerId: string,
  fn: () => Promise<StoredResponse>,
): Promise<StoredResponse> {
  const key = req.header('idempotency-key');
  if (key === undefined) return fn();
  if (!/^[\x21-\x7e]{1,255}$/.test(key)) {
    throw badRequest('Idempotency-Key', 'must be 1-255 visible ASCII characters');
  }
  const route = `${req.method} ${req.baseUrl}${req.route?.path ?? req.path}`;
  const requestHash = createHash('sha256')
    .update(JSON.stringify({ route, params: req.params, body: req.body ?? null }))
    .digest('hex');
  await sql`select pg_advisory_xact_lock(hashtextextended(${`idem:${sellerId}:${key}`}, 0))`.execute(trx);
  const existing = await sql<{ request_hash: string; response_status: number; response_body: unknown }>`
      select request_hash, response_status, response_body from idempotency_keys where seller_id = ${sellerId} and key = ${key}`.execute(
    trx,
  );
  const row = existing.rows[0];
  if (row) {
    if (row.request_hash !== requestHash) {
      throw new HttpError(
        409,
        'idempotency_key_reused',
        'this Idempotency-Key was used with a different request',
        { field: 'Idempotency-Key', rule: 'must not be reused with a different body' },
      );
    }
    return { status: row.response_status, body: row.response_body, replayed: true };
  }
  const response = await fn();
  await sql`insert into idempotency_keys (seller_id, key, route, request_hash, response_status, response_body)
      values (${sellerId}, ${key}, ${route}, ${requestHash}, ${response.status}, ${JSON.stringify(response.body)}::jsonb)`.execute(
    trx,
  );
  return response;
}

/** Sends what withIdempotency answered, marking a replayed answer as checkout and registry do. */
export function sendStored(res: Response, response: StoredResponse): void {
  if (response.replayed) res.setHeader('Idempotent-Replayed', 'true');
  res.status(response.status).json(response.body);
}
