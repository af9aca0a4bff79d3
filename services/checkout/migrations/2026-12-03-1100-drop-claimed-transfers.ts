import { type Kysely, type Migration, sql } from 'kysely';

/**
 * Checkout keeps no copy of other payment paths' claims: x402, tx-hash proofs and /api/verify take only the agent
 * escrow's transfers, which checkout never lists, and the ledger, the one decider, refuses checkout's claim of a
 * transfer already spent.
 */
export const dropClaimedTransfers: Migration = {
  async up(db: Kysely<unknown>) {
    await sql`drop table claimed_transfers`.execute(db);
  },
};
