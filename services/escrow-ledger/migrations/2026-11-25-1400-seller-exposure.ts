import { type Kysely, type Migration, sql } from 'kysely';

/**
 * Escrow is shared, so a seller may spend only what it has there:
 * - `seller_credit_limits`: how far below zero an operator lets a seller's balance (held + available) go (no
 *   row = 0);
 * - `platform_payout_pending` and `platform_payouts`: the platform's revenue reserved for a payout to the
 *   treasury address, sent by settlement once (like a seller payout) and booked out of escrow on
 *   `revenue.paid_out`.
 */
export const sellerExposure: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      create table seller_credit_limits (
        seller_id text primary key,
        credit_limit_micro bigint not null check (credit_limit_micro >= 0),
        updated_at timestamptz not null
      );

      insert into account_kinds (kind, normal_side, floor_micro, description) values
        ('platform_payout_pending', 'credit', 0, 'platform revenue reserved for a payout to the treasury being sent');

      create table platform_payouts (
        payout_id text primary key,
        treasury_address text not null check (treasury_address ~ '^0x[0-9a-f]{40}$'),
        amount_micro bigint not null check (amount_micro > 0),
        status text not null check (status in ('reserved', 'completed', 'cancelled')),
        tx_hash text,
        created_at timestamptz not null,
        completed_at timestamptz
      );
    `.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`drop table platform_payouts, seller_credit_limits;
      delete from account_kinds where kind = 'platform_payout_pending';`.execute(db);
  },
};
