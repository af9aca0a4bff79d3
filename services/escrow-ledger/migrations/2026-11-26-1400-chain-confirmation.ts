import { type Kysely, type Migration, sql } from 'kysely';

/**
 * Payments booked before their transfer is final (issue 19, "Storm-proof"). x402 books a relayed transfer from
 * `payment.confirmed` once it is included, before CONFIRMATIONS; a reorg can still drop it, and the indexer, which
 * publishes only after CONFIRMATIONS, then never reports it. So a transfer booked from `payment.confirmed` is
 * awaiting the chain (`chain_confirmed_at` null) until the indexer observes it or a receipt check finds it
 * CONFIRMATIONS deep; its hold is not released (its money not payable) meanwhile, within a bound. A transfer the
 * check finds gone for CONFIRMATIONS blocks is reversed like a reorged one (`missing_since_block` counts from the
 * first miss). `transactions.reversal_reason` tells such a reversal from an indexer's reorg, so that the same
 * transaction mined again (the relayer resends the same bytes) books the payment again.
 * Transfers booked before this migration are taken as confirmed (older than any reorg window).
 */
export const chainConfirmation: Migration = {
  async up(db: Kysely<any>) {
    await sql`
      alter table transfers add column chain_confirmed_at timestamptz;
      alter table transfers add column missing_since_block bigint;
      update transfers set chain_confirmed_at = observed_at;
      create index transfers_awaiting_chain on transfers (observed_at)
        where chain_confirmed_at is null and status = 'observed';
      alter table transactions add column reversal_reason text
        check (reversal_reason is null or reversal_reason in ('transfer_reorged', 'not_on_chain'));
      update transactions set reversal_reason = 'transfer_reorged' where escrow_status = 'reversed';
      create index transactions_reversed_not_on_chain on transactions (chain_id, tx_hash)
        where reversal_reason = 'not_on_chain'`.execute(db);
  },
  async down(db: Kysely<any>) {
    await sql`
      drop index if exists transactions_reversed_not_on_chain;
      alter table transactions drop column reversal_reason;
      drop index if exists transfers_awaiting_chain;
      alter table transfers drop column chain_confirmed_at, drop column missing_since_block`.execute(db);
  },
};
