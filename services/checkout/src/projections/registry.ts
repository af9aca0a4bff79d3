import type { EventData } from '@paygate/contracts';
import { sql } from 'kysely';
import type { CheckoutTrx } from '../db';

/**
 * Local copies of what the registry publishes: prices come from here, never from the browser. A snapshot
 * whose revision is not newer than the stored one is ignored (redelivery, reordering).
 */
export async function projectSkill(trx: CheckoutTrx, data: EventData<'skill.updated'>): Promise<void> {
  // Endpoints are closed objects: all but their health (no concern of checkout's) is kept.
  const endpoints = data.endpoints.map(({ isHealthy: _, ...endpoint }) => endpoint);
  await sql`
    insert into skills (skill_id, seller_id, revision, name, display_name, status, hold_period_hours, endpoints, updated_at)
    values (${data.skillId}, ${data.sellerId}, ${data.revision}, ${data.name}, ${data.displayName}, ${data.status},
      ${data.holdPeriodHours}, ${JSON.stringify(endpoints)}::jsonb, ${new Date(data.updatedAt)})
    on conflict (skill_id) do update set
      seller_id = excluded.seller_id, revision = excluded.revision, name = excluded.name,
      display_name = excluded.display_name, status = excluded.status,
      hold_period_hours = excluded.hold_period_hours, endpoints = excluded.endpoints, updated_at = excluded.updated_at
    where skills.revision < excluded.revision`.execute(trx);
}

export async function projectSeller(trx: CheckoutTrx, data: EventData<'seller.updated'>): Promise<void> {
  await sql`
    insert into sellers (seller_id, revision, publishable_key, wallet_address, checkout_matching, updated_at)
    values (${data.sellerId}, ${data.revision}, ${data.publishableKey}, ${data.walletAddress},
      ${data.checkoutMatching ?? 'amount'}, ${new Date(data.updatedAt)})
    on conflict (seller_id) do update set
      revision = excluded.revision, publishable_key = excluded.publishable_key,
      wallet_address = excluded.wallet_address, checkout_matching = excluded.checkout_matching,
      updated_at = excluded.updated_at
    where sellers.revision < excluded.revision`.execute(trx);
}
