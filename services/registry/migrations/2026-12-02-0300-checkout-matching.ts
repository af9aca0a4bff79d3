import { type Kysely, type Migration, sql } from 'kysely';

/**
 * How the seller's checkout sessions are matched (seller.updated checkoutMatching): `amount` (the default, a unique
 * exact amount on the shared checkout wallet) or `deposit_address` (an address per session, for buyers whose
 * exchange cannot send an odd amount). Frozen.
 */
export const checkoutMatching: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      alter table sellers add column checkout_matching text not null default 'amount'
        check (checkout_matching in ('amount', 'deposit_address'))`.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`alter table sellers drop column checkout_matching`.execute(db);
  },
};
