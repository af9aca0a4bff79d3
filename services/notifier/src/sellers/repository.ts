import type { EventData } from '@paygate/contracts';
import type { Selectable, Transaction } from 'kysely';
import type { NotifierDatabase, NotifierDb, SellersTable } from '../db';

/** Keeps the newest revision of a seller's webhook settings (redelivered or reordered events are ignored). */
export async function upsertSeller(
  trx: Transaction<NotifierDatabase>,
  seller: EventData<'seller.updated'>,
): Promise<void> {
  await trx
    .insertInto('sellers')
    .values({
      seller_id: seller.sellerId,
      revision: seller.revision,
      webhook_url: seller.webhookUrl,
      webhook_secret_version: seller.webhookSecretVersion,
      updated_at: seller.updatedAt,
    })
    .onConflict((oc) =>
      oc
        .column('seller_id')
        .doUpdateSet((eb) => ({
          revision: eb.ref('excluded.revision'),
          webhook_url: eb.ref('excluded.webhook_url'),
          webhook_secret_version: eb.ref('excluded.webhook_secret_version'),
          updated_at: eb.ref('excluded.updated_at'),
        }))
        .whereRef('sellers.revision', '<', 'excluded.revision'),
    )
    .execute();
}

export async function findSeller(
  db: NotifierDb,
  sellerId: string,
): Promise<Selectable<SellersTable> | undefined> {
  return db.selectFrom('sellers').selectAll().where('seller_id', '=', sellerId).executeTakeFirst();
}
