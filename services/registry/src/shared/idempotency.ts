import {
  fingerprintOf,
  type IdempotencyClaims,
  type IdempotentAnswer,
  idempotencyKeyOf,
  idempotentWithClaim,
  sendIdempotentAnswer,
} from '@paygate/http';
import type { Request, Response } from 'express';
import type { Kysely } from 'kysely';
import type { RegistryDatabase } from '../db';

/**
 * The registry's storage of Idempotency-Keys (its idempotency_keys table), for @paygate/http's claim protocol:
 * the creating POSTs run outside one transaction (they open their own), so a key is claimed first.
 */
function registryClaims(db: Kysely<RegistryDatabase>): IdempotencyClaims {
  const thisKey = (scope: string, key: string) =>
    db.selectFrom('idempotency_keys').where('seller_id', '=', scope).where('key', '=', key);
  return {
    async claim({ scope, key, fingerprint }) {
      const claimed = await db
        .insertInto('idempotency_keys')
        .values({
          seller_id: scope,
          key,
          request_hash: fingerprint,
          response_status: null,
          response_body: null,
        })
        .onConflict((conflict) => conflict.columns(['seller_id', 'key']).doNothing())
        .returning('key')
        .executeTakeFirst();
      return claimed !== undefined;
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
    async complete({ scope, key }, answer) {
      await db
        .updateTable('idempotency_keys')
        .set({ response_status: answer.status, response_body: JSON.stringify(answer.body) })
        .where('seller_id', '=', scope)
        .where('key', '=', key)
        .execute();
    },
    async release({ scope, key }) {
      await db
        .deleteFrom('idempotency_keys')
        .where('seller_id', '=', scope)
        .where('key', '=', key)
        .where('response_status', 'is', null)
        .execute();
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
