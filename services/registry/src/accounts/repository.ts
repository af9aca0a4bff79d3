import { enqueueEvent } from '@paygate/bus';
import { createEvent } from '@paygate/contracts';
import { formatUsdc } from '@paygate/money';
import type { ServiceContext } from '@paygate/runtime';
import { currentTraceCarrier } from '@paygate/telemetry';
import {
  type ExpressionBuilder,
  type Kysely,
  type Selectable,
  sql,
  type Transaction,
  type UpdateObject,
} from 'kysely';
import type { RegistryDatabase, SellersTable } from '../db';
import { hashApiKey } from '../shared/secrets';

export type SellerRow = Selectable<SellersTable>;

/** A seller's keys, webhook and settlement settings as the account view and seller.updated both show them. */
function sellerSettings(row: SellerRow) {
  return {
    publishableKey: row.publishable_key,
    apiKeyVersion: row.api_key_version,
    webhookUrl: row.webhook_url,
    webhookSecretVersion: row.webhook_secret_version,
    settlementFrequency: row.settlement_frequency,
    minimumSettlement: formatUsdc(row.minimum_settlement_micro),
    checkoutMatching: row.checkout_matching,
  };
}

export function toAccount(row: SellerRow) {
  return {
    sellerId: row.id,
    walletAddress: row.wallet_address,
    // The address settlement pays now; a signed change waits in pendingPayoutAddress until its effectiveAt.
    payoutAddress: row.payout_address,
    pendingPayoutAddress:
      row.pending_payout_address && row.pending_payout_effective_at
        ? { address: row.pending_payout_address, effectiveAt: iso(row.pending_payout_effective_at) }
        : null,
    previousApiKeyExpiresAt: isoOrNull(row.previous_api_key_expires_at),
    apiKey: {
      name: row.api_key_name,
      hint: row.api_key_hint,
      createdAt: iso(row.api_key_created_at),
      lastUsedAt: isoOrNull(row.api_key_last_used_at),
    },
    previousApiKey:
      row.previous_api_key_expires_at && row.previous_api_key_hash
        ? {
            name: row.previous_api_key_name ?? 'Secret key',
            hint: row.previous_api_key_hint,
            createdAt: isoOrNull(row.previous_api_key_created_at),
            lastUsedAt: isoOrNull(row.previous_api_key_last_used_at),
            expiresAt: iso(row.previous_api_key_expires_at),
          }
        : null,
    ...sellerSettings(row),
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

const iso = (value: Date | string) => new Date(value).toISOString();
const isoOrNull = (value: Date | string | null) => (value ? iso(value) : null);

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
        ...sellerSettings(row),
        updatedAt: row.updated_at.toISOString(),
      },
      { occurredAt: now, trace: currentTraceCarrier() },
    ),
  );
}

/** Changes a seller's row as a new revision and announces it (seller.updated) in the same transaction. */
export async function changeSeller(
  trx: Transaction<RegistryDatabase>,
  sellerId: string,
  now: Date,
  changes: (eb: ExpressionBuilder<RegistryDatabase, 'sellers'>) => UpdateObject<RegistryDatabase, 'sellers'>,
): Promise<SellerRow> {
  const row = await trx
    .updateTable('sellers')
    .set((eb) => ({ ...changes(eb), revision: eb('revision', '+', 1), updated_at: now }))
    .where('id', '=', sellerId)
    .returningAll()
    .executeTakeFirstOrThrow();
  await publishSellerUpdated(trx, row, now);
  return row;
}

/**
 * changeSeller for a credential, answered only once seller.updated is published: every cache of the old credential
 * has been told to forget it before the seller hears "revoked".
 */
export async function changeCredentials(
  ctx: ServiceContext<RegistryDatabase>,
  sellerId: string,
  now: Date,
  changes: (eb: ExpressionBuilder<RegistryDatabase, 'sellers'>) => UpdateObject<RegistryDatabase, 'sellers'>,
): Promise<SellerRow> {
  const row = await ctx.inTransaction((trx) => changeSeller(trx, sellerId, now, changes));
  await ctx.relay.publishNow();
  return row;
}

export async function publishPayoutChangeRequested(
  trx: Transaction<RegistryDatabase>,
  row: SellerRow,
  currentPayoutAddress: string,
  newPayoutAddress: string,
  at: { requestedAt: Date; effectiveAt: Date },
) {
  await enqueueEvent(
    trx,
    createEvent(
      'seller.payout_address_change_requested',
      'registry',
      {
        sellerId: row.id,
        walletAddress: row.wallet_address,
        currentPayoutAddress,
        newPayoutAddress,
        requestedAt: at.requestedAt.toISOString(),
        effectiveAt: at.effectiveAt.toISOString(),
      },
      { occurredAt: at.requestedAt, trace: currentTraceCarrier() },
    ),
  );
}

export async function findSellerByApiKey(
  db: Kysely<RegistryDatabase>,
  apiKey: string,
  now: Date,
): Promise<SellerRow | undefined> {
  const hash = hashApiKey(apiKey);
  return db
    .selectFrom('sellers')
    .selectAll()
    .where((eb) =>
      eb.or([
        eb('api_key_hash', '=', hash),
        eb.and([eb('previous_api_key_hash', '=', hash), eb('previous_api_key_expires_at', '>', now)]),
      ]),
    )
    .executeTakeFirst();
}

/** Last use is kept to the minute: at most one write per key per minute, whatever the traffic. */
const LAST_USED_RESOLUTION = '1 minute';

/** Records a secret key's use (current or previous column); other services cache keys, so this is the last check. */
export async function touchApiKey(
  db: Kysely<RegistryDatabase>,
  seller: SellerRow,
  apiKey: string,
  now: Date,
): Promise<void> {
  const current = seller.api_key_hash === hashApiKey(apiKey);
  const column = current ? 'api_key_last_used_at' : 'previous_api_key_last_used_at';
  await db
    .updateTable('sellers')
    .set({ [column]: now })
    .where('id', '=', seller.id)
    .where(current ? 'api_key_hash' : 'previous_api_key_hash', '=', hashApiKey(apiKey))
    .where((eb) =>
      eb.or([
        eb(column, 'is', null),
        eb(column, '<', sql<Date>`${now}::timestamptz - ${LAST_USED_RESOLUTION}::interval`),
      ]),
    )
    .execute();
}

export async function findSellerById(
  db: Kysely<RegistryDatabase>,
  sellerId: string,
): Promise<SellerRow | undefined> {
  return db.selectFrom('sellers').selectAll().where('id', '=', sellerId).executeTakeFirst();
}
