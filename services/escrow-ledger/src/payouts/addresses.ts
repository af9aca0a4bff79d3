import { sql } from 'kysely';
import type { LedgerTrx } from '../db';
import type { TypedEnvelope } from '../deps';

/** The ledger's own view of where each seller is paid (newer revisions only): payouts go there, nowhere else. */
export async function onSellerUpdated(trx: LedgerTrx, event: TypedEnvelope<'seller.updated'>): Promise<void> {
  const seller = event.data;
  await sql`insert into seller_payout_addresses (seller_id, revision, payout_address)
      values (${seller.sellerId}, ${seller.revision}, ${seller.payoutAddress.toLowerCase()})
      on conflict (seller_id) do update set revision = excluded.revision,
        payout_address = excluded.payout_address, updated_at = now()
      where seller_payout_addresses.revision < excluded.revision`.execute(trx);
}

/** The seller's payout address in the ledger's view, or null before its first `seller.updated`. */
export async function payoutAddressOf(trx: LedgerTrx, sellerId: string): Promise<string | null> {
  const row = await trx
    .selectFrom('seller_payout_addresses')
    .select('payout_address')
    .where('seller_id', '=', sellerId)
    .executeTakeFirst();
  return row?.payout_address ?? null;
}
