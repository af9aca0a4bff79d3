import {
  fingerprintOf,
  type IdempotencyStore,
  type IdempotentAnswer,
  idempotencyKeyOf,
  idempotentInTransaction,
} from '@paygate/http';
import type { Request } from 'express';
import { sql } from 'kysely';
import type { LedgerTrx } from './db';

/** The ledger's storage of Idempotency-Keys (its idempotency_keys table), in the transaction that books. */
function ledgerKeys(trx: LedgerTrx, route: string): IdempotencyStore {
  return {
    async lock({ scope, key }) {
      await sql`select pg_advisory_xact_lock(hashtextextended(${`idem:${scope}:${key}`}, 0))`.execute(trx);
    },
    async find({ scope, key }) {
      const row = await trx
        .selectFrom('idempotency_keys')
        .select(['request_hash', 'response_status', 'response_body'])
        .where('seller_id', '=', scope)
        .where('key', '=', key)
        .executeTakeFirst();
      return (
        row && {
          fingerprint: row.request_hash,
          answer: { status: row.response_status, body: row.response_body },
        }
      );
    },
    async save({ scope, key, fingerprint }, answer) {
      await sql`insert into idempotency_keys (seller_id, key, route, request_hash, response_status, response_body)
        values (${scope}, ${key}, ${route}, ${fingerprint}, ${answer.status}, ${JSON.stringify(answer.body)}::jsonb)`.execute(
        trx,
      );
    },
  };
}

/**
 * Runs `fn` at most once per (seller, Idempotency-Key), its answer stored in the same transaction as the effect
 * (the rule: @paygate/http idempotency.ts); an advisory lock serialises concurrent retries.
 */
export function withIdempotency(
  trx: LedgerTrx,
  req: Request,
  sellerId: string,
  fn: () => Promise<IdempotentAnswer>,
): Promise<IdempotentAnswer> {
  const key = idempotencyKeyOf(req);
  const request = key === undefined ? undefined : { scope: sellerId, key, fingerprint: fingerprintOf(req) };
  const route = `${req.method} ${req.baseUrl}${req.route?.path ?? req.path}`;
  return idempotentInTransaction(ledgerKeys(trx, route), request, fn);
}
