import type { EventData } from '@paygate/contracts';
import type { Kysely, Transaction } from 'kysely';
import type { NotifierDatabase } from '../db';

export type CheckoutSessionSnapshot = EventData<'checkout.session_created'>;

/** Stores a session snapshot unless the stored one is newer (consumers may reorder a session's events). */
export async function upsertSession(
  trx: Transaction<NotifierDatabase>,
  snapshot: CheckoutSessionSnapshot,
): Promise<void> {
  await trx
    .insertInto('sessions')
    .values({
      session_id: snapshot.sessionId,
      seller_id: snapshot.sellerId,
      status: snapshot.status,
      snapshot: JSON.stringify(snapshot),
      updated_at: snapshot.updatedAt,
    })
    .onConflict((oc) =>
      oc
        .column('session_id')
        .doUpdateSet((eb) => ({
          status: eb.ref('excluded.status'),
          snapshot: eb.ref('excluded.snapshot'),
          updated_at: eb.ref('excluded.updated_at'),
        }))
        .whereRef('sessions.updated_at', '<=', 'excluded.updated_at'),
    )
    .execute();
}

export async function findSession(
  db: Kysely<NotifierDatabase>,
  sessionId: string,
): Promise<CheckoutSessionSnapshot | undefined> {
  const row = await db
    .selectFrom('sessions')
    .select('snapshot')
    .where('session_id', '=', sessionId)
    .executeTakeFirst();
  return row?.snapshot as CheckoutSessionSnapshot | undefined;
}
