import { type Kysely, type Migration, sql } from 'kysely';

/**
 * The double-entry ledger's tables, constraints and triggers; its functions and views are sql/ledger.sql's, applied
 * right after the migrations. Money invariants live here, in Postgres, not only in application code:
 * - every journal entry balances (a statement-level trigger over the inserted postings);
 * - entries and postings are append-only (triggers refuse UPDATE, DELETE and TRUNCATE);
 * - each account's balance is derived from its postings by a trigger, and a CHECK refuses any balance below the
 *   floor its kind allows;
 * - one on-chain transfer pays for one live transaction (a partial unique index on the transfer key);
 * - every entry carries a unique idempotency key.
 */
export const baseline: Migration = {
  async up(db: Kysely<unknown>) {
    await sql`
      create table account_kinds (
        kind text primary key,
        normal_side text not null check (normal_side in ('debit', 'credit')),
        floor_micro bigint,
        description text not null
      );
      insert into account_kinds (kind, normal_side, floor_micro, description) values
        ('escrow_asset', 'debit', 0, 'USDC held by the escrow wallet on chain'),
        ('suspense', 'credit', 0, 'money received that no payment has claimed yet'),
        ('seller_held', 'credit', 0, 'seller share of payments still in their hold period'),
        ('platform_held', 'credit', 0, 'platform fee of payments still in their hold period'),
        ('seller_available', 'credit', null, 'released seller money not yet paid out; negative = owed by the seller'),
        ('seller_payout_pending', 'credit', 0, 'seller money reserved for a payout being sent'),
        ('platform_revenue', 'credit', null,
          'platform fees earned (released); negative = owed back to escrow (a payment reversed after its fee was paid out)'),
        ('refund_pending', 'credit', 0, 'refunds booked whose on-chain transfer is not confirmed yet'),
        ('platform_payout_pending', 'credit', 0, 'platform revenue reserved for a payout to the treasury being sent'),
        ('refund_receivable', 'debit', 0,
          'refunds sent to a payer for a transfer a reorg then dropped: owed back by that payer (owner = payer address)');

      create table accounts (
        id bigserial primary key,
        kind text not null references account_kinds (kind),
        owner text not null default '',
        normal_side text not null check (normal_side in ('debit', 'credit')),
        floor_micro bigint,
        balance_micro bigint not null default 0,
        created_at timestamptz not null default now(),
        unique (kind, owner),
        constraint balance_above_floor check (floor_micro is null or balance_micro >= floor_micro)
      );

      create table journal_entries (
        id bigserial primary key,
        idempotency_key text not null unique,
        entry_type text not null,
        transaction_id text,
        reverses_entry_id bigint unique references journal_entries (id),
        memo jsonb,
        created_at timestamptz not null default now()
      );
      create index journal_entries_transaction on journal_entries (transaction_id) where transaction_id is not null;

      create table postings (
        id bigserial primary key,
        entry_id bigint not null references journal_entries (id),
        account_id bigint not null references accounts (id),
        side text not null check (side in ('debit', 'credit')),
        amount_micro bigint not null check (amount_micro > 0)
      );
      create index postings_entry on postings (entry_id);
      create index postings_account on postings (account_id);

      -- The triggers' functions are defined in sql/ledger.sql, applied right after the migrations: until then
      -- every write they guard fails instead of going unchecked.
      create function refuse_change() returns trigger language plpgsql as $$
      begin raise exception 'sql/ledger.sql is not applied'; end $$;
      create function apply_postings() returns trigger language plpgsql as $$
      begin raise exception 'sql/ledger.sql is not applied'; end $$;
      create function check_entries_balanced() returns trigger language plpgsql as $$
      begin raise exception 'sql/ledger.sql is not applied'; end $$;
      create trigger journal_entries_append_only before update or delete on journal_entries
        for each row execute function refuse_change();
      create trigger journal_entries_no_truncate before truncate on journal_entries
        for each statement execute function refuse_change();
      create trigger postings_append_only before update or delete on postings
        for each row execute function refuse_change();
      create trigger postings_no_truncate before truncate on postings
        for each statement execute function refuse_change();
      -- Balances are applied and entries checked once per INSERT statement over the inserted postings: a batch that
      -- touches a hot account (suspense, escrow, platform holds) hundreds of times updates its row once, and the
      -- floor CHECK sees the batch's net result.
      create trigger postings_apply after insert on postings referencing new table as new_postings
        for each statement execute function apply_postings();
      create trigger postings_balanced after insert on postings referencing new table as new_postings
        for each statement execute function check_entries_balanced();

      -- reversal_reason tells a reversal by the chain confirmation check (not_on_chain) from an indexer's reorg, so
      -- that the same transaction mined again books the payment again.
      create table transactions (
        id text primary key,
        payment_id text not null,
        source text not null,
        seller_id text not null,
        skill_id text,
        skill_name text,
        endpoint_id text,
        session_id text,
        payer text not null,
        chain_id integer not null,
        network text not null,
        tx_hash text not null,
        log_index integer not null,
        amount_micro bigint not null check (amount_micro > 0),
        seller_share_micro bigint not null check (seller_share_micro >= 0),
        platform_share_micro bigint not null check (platform_share_micro >= 0),
        refunded_micro bigint not null default 0,
        refunded_seller_micro bigint not null default 0,
        refunded_platform_micro bigint not null default 0,
        hold_period_hours integer not null check (hold_period_hours between 0 and 168),
        hold_until timestamptz not null,
        escrow_status text not null
          check (escrow_status in ('held', 'available', 'payout_pending', 'settled', 'reversed')),
        settlement_id text,
        confirmed_at timestamptz not null,
        released_at timestamptz,
        settled_at timestamptz,
        reversed_at timestamptz,
        created_at timestamptz not null default now(),
        reversal_reason text check (reversal_reason is null or reversal_reason in ('transfer_reorged', 'not_on_chain')),
        constraint shares_add_up check (seller_share_micro + platform_share_micro = amount_micro),
        constraint refunds_within_amount check (
          refunded_micro >= 0 and refunded_micro <= amount_micro
          and refunded_seller_micro + refunded_platform_micro = refunded_micro
          and refunded_seller_micro <= seller_share_micro and refunded_platform_micro <= platform_share_micro)
      );
      -- One on-chain transfer pays for one live thing; a reversed transaction no longer holds its transfer.
      create unique index one_live_transaction_per_transfer on transactions (chain_id, tx_hash, log_index)
        where escrow_status <> 'reversed';
      create index transactions_seller on transactions (seller_id, created_at desc, id desc);
      create index transactions_due on transactions (hold_until) where escrow_status = 'held';
      create index transactions_seller_available on transactions (seller_id) where escrow_status = 'available';
      create index transactions_settlement on transactions (settlement_id) where settlement_id is not null;
      -- Buyers name a payment by its checkout session or its transfer's tx hash (refund requests, the public
      -- transaction lookup), reversed ones too: an unauthenticated route never scans the transactions.
      create index transactions_session on transactions (session_id) where session_id is not null;
      create index transactions_tx_hash on transactions (chain_id, tx_hash);
      create index transactions_reversed_not_on_chain on transactions (chain_id, tx_hash)
        where reversal_reason = 'not_on_chain';
      create index transactions_payout_pending on transactions (settlement_id) where escrow_status = 'payout_pending';
      -- An unserved call's decision finds its transaction by the gateway's payment id.
      create index transactions_payment on transactions (payment_id);

      -- resolution: how an operator resolved the conflict. A transfer_reorged conflict keeps the whole payment in
      -- detail.payment, so the transfer's re-inclusion can book it then.
      create table payment_conflicts (
        id bigserial primary key,
        kind text not null check (kind in ('transfer_already_claimed', 'amount_exceeds_transfer', 'transfer_reorged',
          'reorg_after_refund', 'transfer_refunded', 'refund_refused')),
        chain_id integer not null,
        tx_hash text not null,
        log_index integer not null,
        payment_id text,
        source text,
        seller_id text,
        amount_micro bigint,
        existing_transaction_id text,
        detail jsonb not null,
        status text not null default 'open' check (status in ('open', 'resolved')),
        created_at timestamptz not null default now(),
        resolution jsonb,
        unique (kind, chain_id, tx_hash, log_index, payment_id)
      );

      create table refund_requests (
        id text primary key,
        transaction_id text not null references transactions (id),
        seller_id text not null,
        payer text not null,
        reason text not null,
        signature text not null,
        status text not null check (status in ('pending', 'approved', 'rejected', 'completed')),
        refund_id text,
        decision_reason text,
        created_at timestamptz not null,
        decided_at timestamptz,
        completed_at timestamptz
      );
      create unique index refund_requests_one_pending on refund_requests (transaction_id) where status = 'pending';
      create index refund_requests_seller on refund_requests (seller_id, created_at desc);

      -- kind payment: a seller's transaction, its amount split between the seller's and the platform's parts.
      -- unmatched_transfer: money that reached escrow and matched no payment, sent back by an operator (checkout's
      -- transfer.refund_requested), booked out of suspense; no transaction, no seller, no parts, the transfer key
      -- instead. unserved_batch: one escrow transfer to a payer carrying several refunds of paid calls their sellers
      -- did not serve (the money left the seller's accounts when each was booked).
      create table refunds (
        id text primary key,
        transaction_id text references transactions (id),
        seller_id text,
        payer text not null,
        chain_id integer not null,
        amount_micro bigint not null check (amount_micro > 0),
        seller_part_micro bigint not null check (seller_part_micro >= 0),
        platform_part_micro bigint not null check (platform_part_micro >= 0),
        phase text not null check (phase in ('in_escrow', 'after_release', 'in_suspense', 'batch')),
        reason text not null,
        status text not null check (status in ('pending', 'completed', 'failed')),
        refund_request_id text references refund_requests (id),
        refund_tx_hash text,
        created_at timestamptz not null,
        completed_at timestamptz,
        kind text not null default 'payment' check (kind in ('payment', 'unmatched_transfer', 'unserved_batch')),
        tx_hash text,
        log_index integer,
        transfer_refund_request_id text,
        constraint parts_add_up check (
          case kind
            when 'payment' then seller_part_micro + platform_part_micro = amount_micro
              and transaction_id is not null and seller_id is not null and phase in ('in_escrow', 'after_release')
            when 'unserved_batch' then seller_part_micro = 0 and platform_part_micro = 0 and transaction_id is null
              and seller_id is null and phase = 'batch'
            else seller_part_micro = 0 and platform_part_micro = 0 and transaction_id is null and seller_id is null
              and phase = 'in_suspense' and tx_hash is not null and log_index is not null
              and transfer_refund_request_id is not null
          end)
      );
      create index refunds_transaction on refunds (transaction_id);
      -- One refund per unmatched transfer, whatever the number of requests.
      create unique index refunds_one_per_unmatched_transfer on refunds (chain_id, tx_hash, log_index)
        where kind = 'unmatched_transfer';

      -- A transfer re-included after a reorg (mined again in another block) is booked again: inclusion counts them,
      -- and the idempotency keys of what an inclusion causes carry its number (<key>#<n> for n > 0); block_hash is
      -- the current inclusion's, so a transfer.reorged about an older block is stale. refund_id marks a refunded
      -- transfer, never also claimed by a payment. A transfer booked from payment.confirmed awaits the chain
      -- (chain_confirmed_at null) until the indexer observes it or a receipt check finds it CONFIRMATIONS deep;
      -- missing_since_block counts from the check's first miss. chain_check_turn orders the check's reads, the least
      -- recently checked first: a sequence, not a timestamp, so no clock can tie or reorder turns.
      create sequence transfers_chain_check_turn;
      create table transfers (
        chain_id integer not null,
        tx_hash text not null check (tx_hash ~ '^0x[0-9a-f]{64}$'),
        log_index integer not null check (log_index >= 0),
        amount_micro bigint not null check (amount_micro > 0),
        from_address text not null,
        to_address text,
        block_number bigint,
        status text not null check (status in ('observed', 'reorged')),
        booked_by text not null check (booked_by in ('transfer.observed', 'payment.confirmed')),
        claimed_by_transaction_id text,
        observed_at timestamptz not null,
        reorged_at timestamptz,
        inclusion integer not null default 0 check (inclusion >= 0),
        block_hash text,
        refund_id text references refunds (id),
        chain_confirmed_at timestamptz,
        missing_since_block bigint,
        chain_check_turn bigint default nextval('transfers_chain_check_turn'),
        primary key (chain_id, tx_hash, log_index),
        constraint refunded_or_claimed check (refund_id is null or claimed_by_transaction_id is null)
      );
      create index transfers_unclaimed on transfers (observed_at) where claimed_by_transaction_id is null;
      create index transfers_awaiting_chain on transfers (observed_at)
        where chain_confirmed_at is null and status = 'observed';
      create index transfers_awaiting_chain_turn on transfers (chain_check_turn)
        where chain_confirmed_at is null and status = 'observed';

      create table idempotency_keys (
        seller_id text not null,
        key text not null,
        route text not null,
        request_hash text not null,
        response_status integer not null,
        response_body jsonb not null,
        created_at timestamptz not null default now(),
        primary key (seller_id, key)
      );

      create table payout_reservations (
        settlement_id text primary key,
        seller_id text not null,
        ok boolean not null,
        amount_micro bigint not null,
        available_micro bigint not null,
        reason text,
        status text not null check (status in ('reserved', 'completed', 'cancelled', 'refused')),
        tx_hash text,
        payout_address text,
        created_at timestamptz not null,
        completed_at timestamptz
      );
      create index payout_reservations_seller on payout_reservations (seller_id, created_at desc);

      -- One claim per on-chain transfer, across every payment path that can spend it (claimed_via: an x402 proof,
      -- the seller middleware's /api/verify, a checkout session, an operator refund of unmatched money): the primary
      -- key lets exactly one path and reference hold it, whatever the number of replicas. payment_id: the payment
      -- booked in the claim's own transaction, so a repeat of the claim is answered with it and never books a second
      -- payment (null for claims that pay for nothing the ledger books).
      create table transfer_claims (
        chain_id integer not null,
        tx_hash text not null check (tx_hash ~ '^0x[0-9a-f]{64}$'),
        log_index integer not null check (log_index >= 0),
        claim_id text not null unique,
        claimed_via text not null check (claimed_via in ('x402', 'verify', 'checkout', 'operator_refund')),
        reference text not null check (length(reference) between 1 and 160),
        payer text not null,
        amount_micro bigint not null check (amount_micro > 0),
        claimed_at timestamptz not null,
        payment_id text,
        primary key (chain_id, tx_hash, log_index)
      );

      -- How far below zero an operator lets a seller's balance (held + available) go: escrow is shared, so a seller
      -- may spend only what it has there (no row: 0).
      create table seller_credit_limits (
        seller_id text primary key,
        credit_limit_micro bigint not null check (credit_limit_micro >= 0),
        updated_at timestamptz not null
      );

      -- The platform's revenue reserved for a payout to the treasury address, sent by settlement once and booked out
      -- of escrow on revenue.paid_out.
      create table platform_payouts (
        payout_id text primary key,
        treasury_address text not null check (treasury_address ~ '^0x[0-9a-f]{40}$'),
        amount_micro bigint not null check (amount_micro > 0),
        status text not null check (status in ('reserved', 'completed', 'cancelled')),
        tx_hash text,
        created_at timestamptz not null,
        completed_at timestamptz
      );

      -- What became of a paid call the gateway forwarded: one row per attempt it reported, a failure
      -- (payment.call_failed, with the buyer's retry window) or a retry served after one (payment.call_recovered).
      -- Keyed by the gateway's payment id: the events may arrive before payment.confirmed is booked, and in any order
      -- (the highest attempt is the call's state). A payment with no row was served at its first attempt.
      create table payment_call_attempts (
        payment_id text not null,
        attempt integer not null check (attempt >= 1),
        seller_id text not null,
        outcome text not null check (outcome in ('failed', 'served')),
        upstream_outcome text check (upstream_outcome in ('error_status', 'timeout', 'unreachable', 'misconfigured')),
        upstream_status integer,
        at timestamptz not null,
        retry_until timestamptz,
        event_id text not null,
        recorded_at timestamptz not null default now(),
        primary key (payment_id, attempt),
        constraint payment_call_attempts_check
          check ((outcome = 'failed') = (upstream_outcome is not null and retry_until is not null))
      );

      -- An unmatched transfer an operator refunded, then dropped by a reorg: its amount is reversed out of
      -- escrow_asset against what its payer owes back (account kind refund_receivable), one row per dropped
      -- inclusion, settled when the same transaction is mined again (by the inclusion that settled it; one arrival
      -- settles one receivable at most).
      create table refund_receivables (
        chain_id integer not null,
        tx_hash text not null,
        log_index integer not null,
        inclusion integer not null,
        refund_id text not null references refunds (id),
        payer text not null,
        amount_micro bigint not null check (amount_micro > 0),
        status text not null check (status in ('open', 'settled')),
        created_at timestamptz not null,
        settled_at timestamptz,
        settled_by_log_index integer,
        settled_by_inclusion integer,
        primary key (chain_id, tx_hash, log_index, inclusion),
        constraint settled_by_an_arrival check ((status = 'settled') = (settled_at is not null
          and settled_by_log_index is not null and settled_by_inclusion is not null))
      );
      create index refund_receivables_open on refund_receivables (chain_id, tx_hash) where status = 'open';
      create unique index refund_receivables_settled_once
        on refund_receivables (chain_id, tx_hash, settled_by_log_index, settled_by_inclusion) where status = 'settled';

      -- The ledger's own view of where each seller is paid (seller.updated, newer revisions only).
      create table seller_payout_addresses (
        seller_id text primary key,
        revision integer not null check (revision >= 1),
        payout_address text not null check (payout_address ~ '^0x[0-9a-f]{40}$'),
        updated_at timestamptz not null default now()
      );

      -- Paid calls their seller did not serve, refunded without the seller's approval: one row per gateway payment
      -- whose retry window closed after a seller failure (payment.call_unserved), decided once: closed until the
      -- ledger decides, then refunded (refund_id), served (a retry was served after all) or not_refundable (decision
      -- says why). A refunded row waits in its payer's accrual until a batch sends it (batch_id).
      create table unserved_calls (
        payment_id text primary key,
        seller_id text not null,
        attempts integer not null check (attempts >= 1),
        retry_until timestamptz not null,
        closed_at timestamptz not null,
        status text not null check (status in ('closed', 'refunded', 'served', 'not_refundable')),
        decision text,
        transaction_id text references transactions (id),
        refund_id text references refunds (id),
        payer text,
        amount_micro bigint check (amount_micro > 0),
        batch_id text references refunds (id),
        event_id text not null,
        recorded_at timestamptz not null default now(),
        checked_at timestamptz not null default now(),
        decided_at timestamptz,
        constraint unserved_calls_check check ((status = 'refunded') = (refund_id is not null and payer is not null
          and amount_micro is not null and decided_at is not null)),
        constraint unserved_calls_check1 check (batch_id is null or status = 'refunded')
      );
      create index unserved_calls_undecided on unserved_calls (checked_at) where status = 'closed';
      create index unserved_calls_accrued on unserved_calls (payer, decided_at)
        where status = 'refunded' and batch_id is null;
      create index unserved_calls_batch on unserved_calls (batch_id) where batch_id is not null`.execute(db);
  },
};
