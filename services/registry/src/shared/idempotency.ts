import {
  fingerprintOf,
  type IdempotencyClaims,
  type IdempotentAnswer,
  idempotencyKeyOf,
  idempotentWithClaim,
  sendIdempotentAnswer,
} from '@paygate/http';
import type { Request, Response } from 'express';
import { type ExpressionBuilder, type Kysely, sql } from 'kysely';
import type { RegistryDatabase } from '../db';

/**
 * Idempotency-Keys for @paygate/http's claim protocol (the creating POSTs open their own transactions, so a key is
 * claimed first); a claim is held by its `created_at`, compared to the millisecond.
 */
export function registryClaims(db: Kysely<RegistryDatabase>): IdempotencyClaims {
  const thisKey = (scope: string, key: string) =>
    db.selectFrom('idempotency_keys').where('seller_id', '=', scope).where('key', '=', key);
  /** The key's claim made at `claimedAt`, still unanswered. */
  const openClaim =
    ({ scope, key }: { scope: string; key: string }, claimedAt: Date) =>
    (eb: ExpressionBuilder<RegistryDatabase, 'idempotency_keys'>) =>
      eb.and([
        eb('seller_id', '=', scope),
        eb('key', '=', key),
        eb('response_status', 'is', null),
        sql<boolean>`date_trunc('milliseconds', created_at) = ${claimedAt}`,
      ]);
  return {
    async claim({ scope, key, fingerprint }) {
      const now = new Date();
      const claimed = await db
        .insertInto('idempotency_keys')
        .values({
          seller_id: scope,
          key,
          request_hash: fingerprint,
          created_at: now,
        })
        .onConflict((conflict) => conflict.columns(['seller_id', 'key']).doNothing())
        .returning('key')
        .executeTakeFirst();
      return claimed === undefined ? undefined : now;
    },
    async find({ scope, key }) {
      const row = await thisKey(scope, key).selectAll().executeTakeFirst();
      if (!row) return undefined;
      return {
        fingerprint: row.request_hash,
        answer:
          row.response_status === null ? null : { status: row.response_status, body: row.response_body },
        createdAt: row.created_at,
      };
    },
    async takeOver(request, abandonedAt) {
      const now = new Date();
      const taken = await db
        .updateTable('idempotency_keys')
        .set({ created_at: now })
        .where(openClaim(request, abandonedAt))
        .returning('key')
        .executeTakeFirst();
      return taken === undefined ? undefined : now;
    },
    async complete(request, claimedAt, answer) {
      await db
        .updateTable('idempotency_keys')
        .set({ response_status: answer.status, response_body: JSON.stringify(answer.body) })
        .where(openClaim(request, claimedAt))
        .execute();
    },
    async release(request, claimedAt) {
      await db.deleteFrom('idempotency_keys').where(openClaim(request, claimedAt)).execute();
    },
  };
}

/**
 * Idempotency-Key support for creating POSTs (the rule: @paygate/http idempotency.ts). Only successful answers
 * are stored, so a request that failed may be retried with the same key.
 */
export async function idempotent(
  db: Kysely<RegistryDatabase>,
  req: Request,
  res: Response,
  sellerId: string,
  handler: () => Promise<IdempotentAnswer>,
): Promise<void> {
  const key = idempotencyKeyOf(req);
  const request = key === undefined ? undefined : { scope: sellerId, key, fingerprint: fingerprintOf(req) };
  sendIdempotentAnswer(res, await idempotentWithClaim(registryClaims(db), request, handler));
}
