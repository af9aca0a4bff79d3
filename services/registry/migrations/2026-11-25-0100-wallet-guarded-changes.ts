import { type Kysely, type Migration, sql } from 'kysely';

/**
 * Changes only the account wallet may make, and their grace periods. Frozen.
 * - previous_api_key_*: the key replaced by a rotation stays valid until previous_api_key_expires_at
 *   (KEY_ROTATION_OVERLAP), with its sealed forwarding key, so the gateway signs with both meanwhile.
 * - pending_payout_*: a payout address signed by the wallet, applied at pending_payout_effective_at
 *   (PAYOUT_ADDRESS_DELAY); payout_address stays the one settlement pays until then.
 */
export const walletGuardedChanges: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      alter table sellers
        add column previous_api_key_hash text check (previous_api_key_hash ~ '^[0-9a-f]{64}$'),
        add column previous_api_key_expires_at timestamptz,
        add column previous_forwarding_key_encrypted text,
        add column pending_payout_address text check (pending_payout_address ~ '^0x[0-9a-fA-F]{40}$'),
        add column pending_payout_effective_at timestamptz,
        add check ((previous_api_key_hash is null) = (previous_api_key_expires_at is null)),
        add check ((pending_payout_address is null) = (pending_payout_effective_at is null))`.execute(db);
    await sql`create index sellers_previous_api_key on sellers (previous_api_key_hash) where previous_api_key_hash is not null`.execute(
      db,
    );
    await sql`create index sellers_previous_key_due on sellers (previous_api_key_expires_at) where previous_api_key_hash is not null`.execute(
      db,
    );
    await sql`create index sellers_pending_payout_due on sellers (pending_payout_effective_at) where pending_payout_address is not null`.execute(
      db,
    );
  },
};
