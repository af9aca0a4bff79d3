import { randomBytes } from 'node:crypto';
import { type Kysely, sql, type Transaction } from 'kysely';
import type { RegistryDatabase } from '../db';

/**
 * A single-use nonce (sign-in and payout-address challenges share the table): alphanumeric, as EIP-4361 requires,
 * 128 bits. Expired nonces are swept as new ones are made (bounded).
 */
export async function issueNonce(
  db: Kysely<RegistryDatabase>,
  now: Date,
  ttlMs: number,
): Promise<{ nonce: string; expiresAt: Date }> {
  const nonce = randomBytes(16).toString('hex');
  const expiresAt = new Date(now.getTime() + ttlMs);
  await db.insertInto('siwe_nonces').values({ nonce, expires_at: expiresAt }).execute();
  await sql`delete from siwe_nonces where nonce in (select nonce from siwe_nonces where expires_at < ${now} limit 100)`.execute(
    db,
  );
  return { nonce, expiresAt };
}

/** Uses a nonce up: true for the one request, across replicas, whose delete finds it unexpired. */
export async function consumeNonce(
  trx: Transaction<RegistryDatabase>,
  nonce: string,
  now: Date,
): Promise<boolean> {
  const consumed = await trx
    .deleteFrom('siwe_nonces')
    .where('nonce', '=', nonce)
    .where('expires_at', '>', now)
    .returning('nonce')
    .executeTakeFirst();
  return consumed !== undefined;
}
