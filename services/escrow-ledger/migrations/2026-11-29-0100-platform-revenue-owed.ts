import { type Kysely, type Migration, sql } from 'kysely';

/**
 * `platform_revenue` may go below zero: a payment reversed (a reorg, a transfer not on chain) after its fee was
 * paid out to the treasury takes the fee back from the platform, which then owes it to escrow. With a floor of 0
 * that reversal was refused, and the seller's share of money that never arrived stayed payable. Platform payouts
 * reserve only a positive balance, and refunds check the balance themselves. Frozen.
 */
export const platformRevenueOwed: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      update account_kinds set floor_micro = null,
        description = 'platform fees earned (released); negative = owed back to escrow (a payment reversed after its fee was paid out)'
        where kind = 'platform_revenue';
      update accounts set floor_micro = null where kind = 'platform_revenue';`.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`
      update account_kinds set floor_micro = 0, description = 'platform fees earned (released)'
        where kind = 'platform_revenue';
      update accounts set floor_micro = 0 where kind = 'platform_revenue';`.execute(db);
  },
};
