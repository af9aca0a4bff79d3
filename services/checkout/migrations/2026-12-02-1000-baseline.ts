import { type Kysely, type Migration, sql } from 'kysely';

/**
 * The checkout schema: projections of registry events (sellers, skills), sessions with reserved unique amounts or
 * deposit addresses, the transfers observed, the payments they made, and the transfers claimed elsewhere.
 */
export const baseline: Migration = {
  async up(db: Kysely<unknown>) {
    await sql`
      -- checkout_matching (seller.updated checkoutMatching): amount, the default (a unique exact amount on the
      -- shared checkout wallet), or deposit_address (an address per session).
      create table sellers (
        seller_id text primary key,
        revision integer not null check (revision >= 1),
        publishable_key text not null,
        wallet_address text not null,
        updated_at timestamptz not null,
        checkout_matching text not null default 'amount' check (checkout_matching in ('amount', 'deposit_address'))
      );
      create unique index sellers_publishable_key on sellers (publishable_key);

      create table skills (
        skill_id text primary key,
        seller_id text not null,
        revision integer not null check (revision >= 1),
        name text not null,
        display_name text not null,
        status text not null,
        hold_period_hours integer not null check (hold_period_hours between 0 and 168),
        endpoints jsonb not null,
        updated_at timestamptz not null
      );
      create index skills_seller_name on skills (seller_id, name);

      -- A session at its own deposit address is paid exactly its price; one on the shared wallet carries a unique
      -- suffix (exact_amount_micro above its price). An underpaid session an operator sent back is refunded.
      create table sessions (
        session_id text primary key,
        seller_id text not null,
        skill_id text,
        skill_name text,
        endpoint_id text,
        description text not null check (length(description) <= 500),
        price_micro bigint not null check (price_micro > 0),
        exact_amount_micro bigint not null,
        status text not null
          check (status in ('open', 'paid', 'paid_late', 'underpaid', 'overpaid', 'expired', 'refunded')),
        hold_period_hours integer not null check (hold_period_hours between 0 and 168),
        created_at timestamptz not null,
        expires_at timestamptz not null,
        late_until timestamptz not null,
        -- true while a transfer of exact_amount_micro could still match this session (until late_until)
        amount_reserved boolean not null default true,
        paid_amount_micro bigint check (paid_amount_micro > 0),
        transfer_id text,
        tx_hash text,
        payer text,
        paid_at timestamptz,
        updated_at timestamptz not null,
        -- the HD child index checkout assigned and the address derived from it (null: the shared wallet)
        deposit_address text,
        derivation_index bigint,
        constraint sessions_check1 check (expires_at > created_at and late_until >= expires_at),
        constraint sessions_check2 check ((status in ('open', 'expired')) = (transfer_id is null)),
        constraint sessions_check3 check ((transfer_id is null) = (paid_amount_micro is null)),
        constraint sessions_exact_amount_check
          check (exact_amount_micro > price_micro or (deposit_address is not null and exact_amount_micro = price_micro))
      );
      -- The uniqueness of an amount among matchable sessions lives here, not in any process.
      create unique index sessions_reserved_amount on sessions (exact_amount_micro) where amount_reserved;
      create index sessions_open_expiry on sessions (expires_at) where status = 'open';
      create index sessions_reservation_end on sessions (late_until) where amount_reserved;
      -- The per-seller caps on session creation: open sessions, and unpaid reservations within a price's suffixes.
      create index sessions_open_by_seller on sessions (seller_id, expires_at) where status = 'open';
      create index sessions_unpaid_reserved_by_seller on sessions (seller_id, exact_amount_micro)
        where amount_reserved and transfer_id is null;
      create unique index sessions_deposit_address on sessions (deposit_address) where deposit_address is not null;
      create unique index sessions_derivation_index on sessions (derivation_index) where derivation_index is not null;
      -- Deposit address indexes come in blocks, so a replica takes a block, not a round trip, per session.
      create sequence deposit_index_blocks minvalue 0 start with 0;

      create table idempotency_keys (
        seller_id text not null,
        idempotency_key text not null,
        request_hash text not null,
        session_id text not null references sessions (session_id),
        created_at timestamptz not null,
        primary key (seller_id, idempotency_key)
      );

      -- claimed: another payment path spent the transfer (the ledger's transfer.claimed), so it is not unmatched
      -- money. refund_requested: an operator sends it back (transfer.refund_requested, one request id per transfer);
      -- it may still name the underpaid session it was short for.
      create table transfers (
        transfer_id text primary key,
        chain_id integer not null,
        network text not null,
        tx_hash text not null,
        log_index integer not null check (log_index >= 0),
        block_number bigint not null,
        block_hash text not null,
        from_address text not null,
        to_address text not null,
        token_address text not null,
        amount_micro bigint not null check (amount_micro >= 0),
        status text not null
          check (status in ('matched', 'unmatched', 'attached', 'refund_requested', 'reorged', 'claimed')),
        unmatched_reason text,
        candidate_session_id text,
        session_id text references sessions (session_id),
        resolution_note text,
        resolved_at timestamptz,
        observed_at timestamptz not null,
        updated_at timestamptz not null,
        refund_request_id text,
        unique (chain_id, tx_hash, log_index),
        constraint transfers_session_check check (case
          when status in ('matched', 'attached') then session_id is not null
          when status = 'refund_requested' then true
          else session_id is null
        end),
        constraint refund_requested_has_request check (status <> 'refund_requested' or refund_request_id is not null)
      );
      create index transfers_status on transfers (status, observed_at);
      create unique index transfers_refund_request on transfers (refund_request_id) where refund_request_id is not null;

      create table payments (
        payment_id text primary key,
        session_id text not null references sessions (session_id),
        transfer_id text not null references transfers (transfer_id),
        amount_micro bigint not null check (amount_micro > 0),
        status text not null check (status in ('confirmed', 'reversed')),
        confirmed_at timestamptz not null,
        reversed_at timestamptz
      );
      -- One transfer pays once and a session is paid once, whatever the redeliveries.
      create unique index payments_confirmed_transfer on payments (transfer_id) where status = 'confirmed';
      create unique index payments_confirmed_session on payments (session_id) where status = 'confirmed';

      -- Transfers claimed at the ledger by another payment path (claimed_via: x402, verify), remembered even before
      -- the transfer itself is observed here, whichever event arrives first.
      create table claimed_transfers (
        chain_id integer not null,
        tx_hash text not null,
        log_index integer not null check (log_index >= 0),
        claimed_via text not null,
        claim_id text not null,
        claimed_at timestamptz not null,
        primary key (chain_id, tx_hash, log_index)
      )`.execute(db);
  },
};
