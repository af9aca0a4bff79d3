import { enqueueEvent } from '@paygate/bus';
import { createEvent } from '@paygate/contracts';
import { formatUsdc } from '@paygate/money';
import type { Kysely, Selectable, Transaction } from 'kysely';
import type { RegistryDatabase, SellersTable } from '../db';
import { hashApiKey } from '../shared/secrets';
import { traceOption } from '../shared/trace';

export type SellerRow = Selectable<SellersTable>;

export function toAccount(row: SellerRow) {
  return {
    sellerId: row.id,
    walletAddress: row.wallet_address,
    payoutAddress: row.payout_address,
    publishableKey: row.publishable_key,
    apiKeyVersion: row.api_key_version,
    webhookUrl: row.webhook_url,
    webhookSecretVersion: row.webhook_secret_version,
    settlementFrequency: row.settlement_frequency,
    minimumSettlement: formatUsdc(row.minimum_settlement_micro),
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

export function toIdentity(row: SellerRow) {
  return {
    sellerId: row.id,
    walletAddress: row.wallet_address,
    payoutAddress: row.payout_address,
    publishableKey: row.publishable_key,
    apiKeyVersion: row.api_key_version,
  };
}

/** seller.updated goes out through the outbox in the transaction that made the change. */
export async function publishSellerUpdated(trx: Transaction<RegistryDatabase>, row: SellerRow, now: Date) {
  await enqueueEvent(
    trx,
    createEvent(
      'seller.updated',
      'registry',
      {
        sellerId: row.id,
        revision: row.revision,
        walletAddress: row.wallet_address,
        payoutAddress: row.payout_address,
        publishableKey: row.publishable_key,
        apiKeyVersion: row.api_key_version,
        webhookUrl: row.webhook_url,
        webhookSecretVersion: row.webhook_secret_version,
        settlementFrequency: row.settlement_frequency,
        minimumSettlement: formatUsdc(row.minimum_settlement_micro),
        updatedAt: row.updated_at.toISOString(),
      },
      { occurredAt: now, ...traceOption() },
    ),
  );
}

export async function findSellerByApiKey(
  db: Kysely<RegistryDatabase>,
  apiKey: string,
): Promise<SellerRow | undefined> {
  return db
    .selectFrom('sellers')
    .selectAll()
    .where('api_key_hash', '=', hashApiKey(apiKey))
    .executeTakeFirst();
}

export async function findSellerById(
  db: Kysely<RegistryDatabase>,
  sellerId: string,
): Promise<SellerRow | undefined> {
  return db.selectFrom('sellers').selectAll().where('id', '=', sellerId).executeTakeFirst();
}
